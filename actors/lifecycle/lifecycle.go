// Package lifecycle holds what the coordinators share about stopping their
// actors: ask each to close (so it answers what waits), wait a bounded
// time, then stop it.
package lifecycle

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// StopAll sends each actor the message closeMsg(done) makes, waits up to
// timeout in total for them to close the done channels, and stops every
// actor either way. what names the actors in the error.
func StopAll(root *actor.RootContext, pids []*actor.PID, closeMsg func(done chan struct{}) any, timeout time.Duration, what string) error {
	dones := make([]chan struct{}, len(pids))
	for i, pid := range pids {
		dones[i] = make(chan struct{})
		root.Send(pid, closeMsg(dones[i]))
	}
	deadline := time.After(timeout)
	var err error
	for i, pid := range pids {
		if err == nil {
			select {
			case <-dones[i]:
			case <-deadline:
				err = fmt.Errorf("%s did not stop within %s", what, timeout)
			}
		}
		root.Stop(pid)
	}
	return err
}
