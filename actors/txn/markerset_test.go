package txn

// Scripted tests of the marker bookkeeping (markerset.go):
// testdata/markers/*.txt. Commands:
//
//	begin n=N                   a round of N sends
//	answer t-0 [err=NAME]       a partition's answer (NAME: a Kafka error
//	answer g:grp [err=NAME]     name, or "io" for a non-Kafka error); a
//	                            group's completion answer
//
// Each answer prints its verdict and what follows (wait, complete, retry
// with the targets to resend, halt).

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/internal/scripttest"
)

func TestMarkerScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/markers/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var m markerSet
			scripttest.Run(t, f, *rewrite, func(cmd string) []string { return runMarkerCmd(t, &m, cmd) })
		})
	}
}

func runMarkerCmd(t *testing.T, m *markerSet, cmd string) []string {
	name, args := scripttest.Args(cmd)
	switch name {
	case "begin":
		n, err := strconv.Atoi(args["n"])
		if err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
		m.begin(n)
		return nil
	case "answer":
		var target markerTarget
		var err error
		for k, v := range args {
			switch {
			case k == "err":
				err = markerErr(t, v)
			case strings.HasPrefix(k, "g:"):
				target.group = strings.TrimPrefix(k, "g:")
			default:
				target.tp = parseParts(k)[0]
			}
		}
		v, step := m.answer(target, err)
		out := v.String() + " " + step.String()
		if step == stepRetry {
			var rs []string
			for _, r := range m.retry {
				rs = append(rs, r.String())
			}
			out += " " + strings.Join(rs, ",")
		}
		if step == stepHalt && len(m.stuck) > 0 {
			var ss []string
			for _, r := range m.stuck {
				ss = append(ss, r.String())
			}
			out += " stuck=" + strings.Join(ss, ",")
		}
		return []string{out}
	}
	t.Fatalf("unknown command %q", cmd)
	return nil
}

func markerErr(t *testing.T, name string) error {
	if name == "io" {
		return errors.New("write: input/output error")
	}
	for code := int16(-1); code < 200; code++ {
		var ke *kerr.Error
		if e := kerr.ErrorForCode(code); errors.As(e, &ke) && ke.Message == name {
			return ke
		}
	}
	t.Fatalf("no Kafka error %q", name)
	return nil
}
