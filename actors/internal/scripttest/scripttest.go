// Package scripttest runs the scripted tests of the actors' pure state
// machines: a script is a text file of commands, each followed by the
// lines it must print ("> ..."); blank lines and "#" comments are kept as
// they are. With rewrite the expectations are regenerated in place, for a
// deliberate change whose diff is then read.
package scripttest

import (
	"os"
	"strings"
	"testing"
)

// Run runs the script at path, one command at a time through step, and
// compares what step prints with the expected lines under the command.
func Run(t *testing.T, path string, rewrite bool, step func(cmd string) []string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "> ") || line == ">" {
			continue // old expectations; replaced below
		}
		out = append(out, line)
		cmd := strings.TrimSpace(line)
		if cmd == "" || strings.HasPrefix(cmd, "#") {
			continue
		}
		var want []string
		for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], ">"); j++ {
			want = append(want, lines[j])
		}
		got := step(cmd)
		for k := range got {
			got[k] = "> " + got[k]
		}
		out = append(out, got...)
		if !rewrite && strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:%d: %s\n got:\n%s\nwant:\n%s", path, i+1, cmd, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if rewrite {
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Args splits a command line into its name and its key=value arguments
// (a bare word is a key with an empty value).
func Args(cmd string) (name string, args map[string]string) {
	fields := strings.Fields(cmd)
	args = map[string]string{}
	if len(fields) == 0 {
		return "", args
	}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		args[k] = v
	}
	return fields[0], args
}
