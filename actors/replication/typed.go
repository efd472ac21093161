package replication

import (
	"context"
	"fmt"
	"strings"
)

// Propose proposes cmd for key through r and hands done the command's own
// result type: Apply's result when it is an R; Apply's result as the error
// when it is an error (the command was applied and refused, or this node's
// applier could not take it); the replicator's error otherwise. A result
// of any other type is a broken invariant, reported as an error wrapping
// ErrUnexpectedResult (never a panic on the callback goroutine). done
// follows the package's contract: exactly once, never inline.
func Propose[R any](r Replicator, key string, cmd Command, done func(R, error)) {
	r.Propose(key, cmd, func(res any, err error) { done(As[R](res, err)) })
}

// As converts a raw outcome (as Replicator.Propose reports it) to R, as
// Propose does.
func As[R any](res any, err error) (R, error) {
	var zero R
	if err != nil {
		return zero, err
	}
	switch v := res.(type) {
	case error:
		return zero, v
	case R:
		return v, nil
	case nil:
		// Untyped nil is the zero result of an interface R (Apply
		// returning "no error" for R = error or any).
		if any(zero) == nil {
			return zero, nil
		}
	}
	return zero, fmt.Errorf("%w: got %T, want %s", ErrUnexpectedResult, res, typeName[R]())
}

func typeName[R any]() string { return strings.TrimPrefix(fmt.Sprintf("%T", (*R)(nil)), "*") }

// Await proposes cmd and blocks until its outcome, or until cancel closes:
// then it returns an error wrapping ErrOutcomeUnknown (the command may
// still commit). It is for callers that may block (admin requests, a
// transaction actor that waits for its own write); an actor that must keep
// serving proposes with Propose and finishes on a message. It must not run
// on a goroutine that a replicator's apply or callbacks wait on. A result
// arriving after the give-up is dropped without blocking the replicator.
func Await[R any](r Replicator, key string, cmd Command, cancel <-chan struct{}) (R, error) {
	type outcome struct {
		res R
		err error
	}
	ch := make(chan outcome, 1) // buffered: a late done never blocks
	Propose(r, key, cmd, func(res R, err error) { ch <- outcome{res, err} })
	select {
	case o := <-ch:
		return o.res, o.err
	case <-cancel:
		var zero R
		return zero, fmt.Errorf("propose to %s: %w: stopped waiting for it", key, ErrOutcomeUnknown)
	}
}

// ProposeWait is Await bounded by ctx: when ctx ends first the error wraps
// ErrOutcomeUnknown and ctx's error.
func ProposeWait[R any](ctx context.Context, r Replicator, key string, cmd Command) (R, error) {
	res, err := Await[R](r, key, cmd, ctx.Done())
	if err != nil && ctx.Err() != nil {
		select {
		case <-ctx.Done():
			// Await gave up because of ctx (or ctx ended just after):
			// name the reason.
			return res, fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		default:
		}
	}
	return res, err
}
