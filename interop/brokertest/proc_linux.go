package brokertest

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// forker starts child processes from one goroutine locked to its OS
// thread for the life of the test process. Linux delivers a child's
// parent-death signal when the thread that forked it exits, not the
// process, and the Go runtime ends threads (one whose goroutine exits
// while locked to it); a thread that is never released never exits, so
// the signal comes only when the test process dies.
var forker struct {
	once sync.Once
	reqs chan forkReq
}

type forkReq struct {
	cmd  *exec.Cmd
	done chan error
}

// StartProcess starts cmd so that the kernel kills it (SIGKILL) when this
// process dies, however it dies (a test binary killed by go test's
// -timeout, SIGKILL, a crash): brokers and tools a test starts do not
// outlive it. Use it instead of cmd.Start for every long-lived child.
func StartProcess(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	forker.once.Do(func() {
		forker.reqs = make(chan forkReq)
		go func() {
			runtime.LockOSThread() // never unlocked: see forker
			for r := range forker.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	forker.reqs <- forkReq{cmd: cmd, done: done}
	if err := <-done; err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return nil
}

// processAlive reports whether pid names a process (a zombie counts), as
// far as signal 0 tells.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// runAsUser makes cmd run as u (nil: as this process's user), with no
// supplementary groups.
func runAsUser(cmd *exec.Cmd, u *nodeUser) {
	if u == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid}
}
