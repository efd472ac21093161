package brokertest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// holderEnv, set in a helper process's environment, names the regent
// binary TestHoldBroker runs.
const holderEnv = "REGENT_BROKERTEST_HOLDER_BIN"

func TestMain(m *testing.M) {
	code := m.Run()
	if os.Getenv(holderEnv) == "" { // a holder runs its parent's binary
		RemoveBinary()
	}
	os.Exit(code)
}

// A test process killed with SIGKILL (as go test's -timeout does) takes
// its brokers with it: this re-runs the test binary as a holder that
// starts a broker, kills the holder, and waits for the broker to go.
func TestBrokerDiesWithTestProcess(t *testing.T) {
	bin := Binary(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command(self, "-test.run=^TestHoldBroker$", "-test.v")
	// The holder's temp dirs (the broker's data) go under ours, removed
	// after the test.
	holder.Env = append(os.Environ(), holderEnv+"="+bin, "TMPDIR="+t.TempDir())
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	holder.Stderr = os.Stderr
	if err := StartProcess(holder); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = holder.Process.Kill()
		_ = stdin.Close()
		_ = holder.Wait()
	})

	pids := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "broker pid "); ok {
				if pid, err := strconv.Atoi(rest); err == nil {
					pids <- pid
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var pid int
	select {
	case pid = <-pids:
	case <-time.After(90 * time.Second):
		t.Fatal("holder did not start a broker within 90s")
	}
	if gone, state := processGone(pid); gone {
		t.Fatalf("broker %d not running before the holder is killed (%s)", pid, state)
	}

	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	killed := time.Now()
	deadline := killed.Add(10 * time.Second)
	for {
		gone, state := processGone(pid)
		if gone {
			t.Logf("broker %d gone %v after its test process was killed (%s)", pid, time.Since(killed).Round(time.Millisecond), state)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d still running (%s) 10s after its test process was killed", pid, state)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronization
	}
}

// TestHoldBroker is TestBrokerDiesWithTestProcess's holder: it starts a
// broker, prints its pid and holds it until its parent kills it (or
// closes its stdin, then the broker is stopped as usual).
func TestHoldBroker(t *testing.T) {
	bin := os.Getenv(holderEnv)
	if bin == "" {
		t.Skip("the helper process of TestBrokerDiesWithTestProcess")
	}
	build.once.Do(func() { build.path = bin })
	b := Start(t)
	fmt.Printf("broker pid %d\n", b.PID())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// processGone reports whether pid has exited (no such process, or a
// zombie: exited and not yet reaped by whoever inherited it), with the
// state read from /proc.
func processGone(pid int) (bool, string) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		return true, "no such process"
	}
	if err != nil {
		return false, err.Error()
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false, "unreadable stat: " + s
	}
	state := s[i+2 : i+3]
	return state == "Z" || state == "X", "state " + state
}

// The builds of test processes that are gone are removed; those of live
// processes, and dirs named without a pid, are kept.
func TestRemoveOrphanBinaries(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gone := exec.Command(self, "-test.run=^$")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dirs := map[string]bool{ // name: removed
		fmt.Sprintf("%s%d-1", binaryDirPrefix, gone.Process.Pid):  true,
		fmt.Sprintf("%s%d-2", binaryDirPrefix, os.Getpid()):       false,
		fmt.Sprintf("%s%d-3", binaryDirPrefix, os.Getppid()):      false,
		binaryDirPrefix + "123456789":                             false,
		fmt.Sprintf("%sx%d-4", binaryDirPrefix, gone.Process.Pid): false,
	}
	for d := range dirs {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, d, "regent"), []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removeOrphanBinaries()
	for d, removed := range dirs {
		_, err := os.Stat(filepath.Join(tmp, d))
		if got := errors.Is(err, os.ErrNotExist); got != removed {
			t.Errorf("%s: removed %v, want %v (stat: %v)", d, got, removed, err)
		}
	}
}
