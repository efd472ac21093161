//go:build !linux

package brokertest

import (
	"fmt"
	"os/exec"
)

// StartProcess starts cmd. Only Linux has a parent-death signal: elsewhere
// a child outlives a test process that is killed.
func StartProcess(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return nil
}

// processAlive reports true: without Linux's parent-death signal, a gone
// test process's brokers may still run its build.
func processAlive(int) bool { return true }

// runAsUser does nothing: separated clusters need Linux (links_other.go).
func runAsUser(*exec.Cmd, *nodeUser) {}
