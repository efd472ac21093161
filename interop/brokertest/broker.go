// Package brokertest builds the regent binary and runs it as a child
// process for tests: on a free loopback port, with a temporary data
// directory, killable with SIGKILL and restartable on the same data. On
// Linux its children die with the test process (StartProcess).
package brokertest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var build struct {
	once sync.Once
	path string
	err  error
}

// moduleRoot finds the repository root from this file's location.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// binaryDirPrefix starts the name of the temp dir Binary builds into; the
// building process's pid follows, then a dash.
const binaryDirPrefix = "regent-bin-"

// Binary builds ./cmd/regent once per test process and returns its path.
// It first removes the builds of test processes that are gone without
// calling RemoveBinary (killed, as go test's -timeout does).
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		removeOrphanBinaries()
		dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", binaryDirPrefix, os.Getpid()))
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(dir, "regent")
		cmd := exec.Command("go", "build", "-o", build.path, "./cmd/regent")
		cmd.Dir = moduleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build ./cmd/regent: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

// RemoveBinary deletes the binary Binary built, if any. A test package
// that uses Binary calls it from TestMain after m.Run: each build is a
// 35 MB file in the temp dir, and left behind by every test process they
// filled the disk of a machine that runs the suites many times a day.
func RemoveBinary() {
	if build.path != "" {
		_ = os.RemoveAll(filepath.Dir(build.path))
	}
}

// removeOrphanBinaries deletes the build dirs of processes no longer
// running. Dirs named without a pid (older builds) are left alone, as are
// those of live processes (their pid may have been reused: kept).
func removeOrphanBinaries() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binaryDirPrefix+"*-*"))
	for _, d := range dirs {
		pidText, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), binaryDirPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(d)
	}
}

// Broker is a running regent child process.
type Broker struct {
	Addr string
	Dir  string
	Args []string

	t testing.TB
	// user, if set, is whom the process runs as (StartSeparatedCluster);
	// set before the first start.
	user   *nodeUser
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	log    *bytes.Buffer
	mu     sync.Mutex
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs a broker on a fresh data directory. extra args are appended.
// The broker is killed when the test ends.
func Start(t testing.TB, extra ...string) *Broker {
	t.Helper()
	b := &Broker{Dir: t.TempDir(), Args: extra, t: t}
	b.Addr = fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	b.start()
	t.Cleanup(func() {
		b.Kill()
		if t.Failed() {
			t.Logf("broker log tail:\n%s", b.LogTail(8000))
		}
	})
	return b
}

func (b *Broker) start() {
	b.t.Helper()
	bin := Binary(b.t)
	args := append([]string{"--listen", b.Addr, "--data", b.Dir}, b.Args...)
	cmd := exec.Command(bin, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &lockedWriter{w: &buf, mu: &b.mu}, &lockedWriter{w: &buf, mu: &b.mu}
	if err := StartProcess(cmd); err != nil {
		b.t.Fatalf("start regent: %v", err)
	}
	b.cmd, b.log = cmd, &buf
	exited := make(chan struct{})
	b.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.Addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			b.t.Fatalf("regent exited during start:\n%s", b.LogTail(4000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("regent did not listen on %s within 60s:\n%s", b.Addr, b.LogTail(4000))
		}
	}
}

// Kill sends SIGKILL and waits for the process to go.
func (b *Broker) Kill() {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	b.waitExit(30 * time.Second)
	b.cmd = nil
}

// Stop sends SIGTERM and waits for a clean exit.
func (b *Broker) Stop() error {
	if b.cmd == nil {
		return nil
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	err := b.waitExit(30 * time.Second)
	b.cmd = nil
	return err
}

func (b *Broker) waitExit(limit time.Duration) error {
	select {
	case <-b.exited:
		if st := b.cmd.ProcessState; st != nil && !st.Success() {
			return fmt.Errorf("regent exited: %s", st)
		}
		return nil
	case <-time.After(limit):
		_ = b.cmd.Process.Kill()
		<-b.exited
		return fmt.Errorf("regent did not exit within %s", limit)
	}
}

// Restart starts the broker again on the same address and data.
func (b *Broker) Restart() {
	b.t.Helper()
	b.start()
}

// PID is the running broker's process id (0: not running), e.g. to read
// its memory from /proc/PID/status.
func (b *Broker) PID() int {
	if b.cmd == nil || b.cmd.Process == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// Exited reports whether the broker process has exited, and how.
func (b *Broker) Exited() (bool, string) {
	if b.cmd == nil {
		return true, "not running"
	}
	select {
	case <-b.exited:
		if st := b.cmd.ProcessState; st != nil {
			return true, st.String()
		}
		return true, "exited"
	default:
		return false, ""
	}
}

// LogTail returns the last n bytes of the broker's output.
func (b *Broker) LogTail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.log == nil {
		return ""
	}
	s := b.log.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
