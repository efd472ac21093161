package cluster

import (
	"errors"
	"fmt"
	"time"
)

// ErrOutcomeUnknown wraps a proposal that was not seen to commit in time,
// or whose replicator failed without saying whether it applied: the
// command may or may not have been applied, and callers must not assume
// either (Kafka's REQUEST_TIMED_OUT tells a client just that).
var ErrOutcomeUnknown = errors.New("outcome unknown")

// ProposeWait proposes cmd for key and waits up to timeout for Apply's
// result, for callers that may block (admin requests off the event loop).
// It returns Apply's value, or Apply's error when Apply returned an error;
// ErrNotLeader (wrapped) when this node cannot propose; or an error
// wrapping ErrOutcomeUnknown when the outcome is unknown. A result arriving
// after the timeout is dropped without blocking the replicator.
func ProposeWait(r Replicator, key string, cmd Command, timeout time.Duration) (any, error) {
	type outcome struct {
		res any
		err error
	}
	ch := make(chan outcome, 1) // buffered: a late done never blocks
	r.Propose(key, cmd, func(res any, err error) {
		select {
		case ch <- outcome{res, err}:
		default:
		}
	})
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case o := <-ch:
		switch {
		case errors.Is(o.err, ErrNotLeader):
			return nil, o.err
		case o.err != nil:
			return nil, fmt.Errorf("%w: %w", ErrOutcomeUnknown, o.err)
		}
		if err, ok := o.res.(error); ok {
			return nil, err
		}
		return o.res, nil
	case <-timer.C:
		return nil, fmt.Errorf("%w: not committed within %s", ErrOutcomeUnknown, timeout)
	}
}
