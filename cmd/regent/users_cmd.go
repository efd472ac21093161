package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/regent-broker/regent/actors/users"
)

// usersCommand runs `regent users add NAME --mechanism M --password-file F
// --data DIR`: it writes a SCRAM credential into a stopped single node's
// store, for a first admin before anyone can log in over SASL. The
// broker's data directory lock tells a running broker apart. Cluster data
// directories are refused (their state is rebuilt from raft at start):
// create users there with kafka-configs or AlterUserScramCredentials on a
// listener that needs no SASL.
func usersCommand(args []string, stdout, stderr io.Writer) int {
	usage := func() int {
		fmt.Fprintln(stderr, `usage:
  regent users add NAME --mechanism SCRAM-SHA-256|SCRAM-SHA-512 --password-file FILE --data DIR [--iterations N]
(the broker must be stopped; the file's first line is the password)`)
		return 2
	}
	if len(args) < 2 || args[0] != "add" || strings.HasPrefix(args[1], "-") {
		return usage()
	}
	name := args[1]
	fs := flag.NewFlagSet("regent users add", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mech := fs.String("mechanism", "SCRAM-SHA-512", "SCRAM-SHA-256 or SCRAM-SHA-512")
	pwFile := fs.String("password-file", "", "file whose first line is the password")
	dataDir := fs.String("data", "./data", "the broker's data directory")
	iters := fs.Int("iterations", users.MinIterations, "PBKDF2 iterations (4096-16384)")
	if err := fs.Parse(args[2:]); err != nil || fs.NArg() > 0 {
		return usage()
	}
	if err := addUser(name, *mech, *pwFile, *dataDir, *iters); err != nil {
		fmt.Fprintln(stderr, "regent users add:", err)
		return 1
	}
	fmt.Fprintf(stdout, "added %s credential for user %s in %s\n", *mech, name, *dataDir)
	return 0
}

func addUser(name, mechName, pwFile, dataDir string, iters int) error {
	m, ok := users.ParseMechanism(mechName)
	if !ok {
		return fmt.Errorf("--mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", mechName)
	}
	if iters < users.MinIterations || iters > users.MaxIterations {
		return fmt.Errorf("--iterations %d: want %d-%d", iters, users.MinIterations, users.MaxIterations)
	}
	if pwFile == "" {
		return errors.New("--password-file is required (a password on the command line would show in ps)")
	}
	raw, err := os.ReadFile(pwFile)
	if err != nil {
		return fmt.Errorf("read password: %w", err)
	}
	pw, _, _ := strings.Cut(string(raw), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	if pw == "" {
		return fmt.Errorf("%s: empty password", pwFile)
	}
	if err := os.MkdirAll(filepath.Join(dataDir, "meta"), 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	unlock, err := lockDataDir(dataDir)
	if err != nil {
		return fmt.Errorf("%w (stop the broker first)", err)
	}
	defer unlock()
	return users.AddOffline(dataDir, name, m, pw, int32(iters))
}
