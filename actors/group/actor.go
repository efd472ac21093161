package group

// The group actor: a thin shell that owns one Group, runs its steps,
// persists their records through the replicator, delivers replies and
// keeps one timer for the group's next deadline.

import (
	"errors"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/replication"
)

// opMsg runs one step of the state machine for a request.
type opMsg struct {
	// create: the step may bring a group into existence, so a missing
	// group gets an actor (otherwise it is answered on a scratch state).
	create bool
	do     func(g *Group, now time.Time, ref Ref) Effects
	// reply delivers the answer; fail builds the answer to give when the
	// coordinator cannot serve (closing, a failed write, a panic).
	reply func(kmsg.Response)
	fail  func(code int16) kmsg.Response
}

type (
	tickMsg   struct{}
	expireMsg struct{}
	// dropTopicsMsg: topics were deleted; their offsets go.
	dropTopicsMsg struct{ names map[string]bool }
	// retireMsg is the last message a retired actor gets (sent under the
	// manager's lock after its entry went).
	retireMsg struct{}
	closeMsg  struct{ done chan struct{} }
	// persistedMsg carries a replicator's answer (always on another
	// goroutine, after Propose returned: replication's contract).
	persistedMsg struct {
		eff Effects
		err error
	}
)

// groupActor owns g; every field is touched only on the actor's goroutine
// (except timer's callback, which only sends a message).
type groupActor struct {
	m *Manager
	g *Group
	// stop is the activation's (Manager.mu.stop): closed, the actor
	// proposes nothing more, as it is being stopped.
	stop   <-chan struct{}
	self   *actor.PID
	logger *slog.Logger

	refs    map[Ref]*opMsg
	nextRef Ref
	// persisting counts proposals whose answer has not come back.
	persisting int

	timer   *time.Timer
	timerAt time.Time
	// retired: the manager forgot this actor; whatever still arrives is
	// handed back to the manager for a new actor.
	retired bool
	closed  bool
	// woken: spawned for a dormant group, for a message on its way; it
	// does not go back to rest before that message.
	woken bool
}

func (a *groupActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.self = ctx.Self()
		if a.g.Live() && !a.woken {
			// A loaded group: arm its timers. (A new or woken one waits
			// for the message it was spawned for; retiring it now would
			// loop.)
			a.afterStep()
		}
	case *opMsg:
		if a.retired {
			a.m.dispatch(a.g.id, msg)
			return
		}
		if a.closed {
			msg.reply(msg.fail(kerr.NotCoordinator.Code))
			return
		}
		a.nextRef++
		ref := a.nextRef
		a.refs[ref] = msg
		a.run(func(now time.Time) Effects { return msg.do(a.g, now, ref) })
	case *tickMsg:
		if !a.retired && !a.closed {
			a.timerAt = time.Time{}
			a.run(a.g.Tick)
		}
	case *expireMsg:
		if a.retired {
			// Sent before the group went to rest: it goes where the
			// group is now.
			a.m.redeliver(a.g.id, msg)
			return
		}
		if !a.closed {
			a.run(a.g.ExpireOffsets)
		}
	case *dropTopicsMsg:
		if a.retired {
			a.m.redeliver(a.g.id, msg)
			return
		}
		if !a.closed {
			a.run(func(now time.Time) Effects { return a.g.DropTopics(now, msg.names) })
		}
	case *persistedMsg:
		a.persisting--
		if a.closed {
			// Its requests were answered NOT_COORDINATOR at shutdown;
			// the group is rebuilt from the store on the next Activate.
			return
		}
		a.finish(msg.eff, msg.err)
		a.afterStep()
	case *retireMsg:
		ctx.Stop(ctx.Self())
	case *closeMsg:
		a.shutdown()
		close(msg.done)
	}
}

// run executes a step, persists its records and delivers its replies. A
// panic must not lose requests: every waiting request is answered and the
// group is rebuilt from what was persisted.
func (a *groupActor) run(step func(now time.Time) Effects) {
	var eff Effects
	ok := func() (ok bool) {
		defer func() {
			if p := recover(); p != nil {
				a.logger.Error("group step panicked; rebuilding the group from its log", "panic", p, "stack", string(debug.Stack()))
				ok = false
			}
		}()
		eff = step(time.Now())
		return true
	}()
	if !ok {
		a.failAll(kerr.UnknownServerError.Code)
		a.g.releasePending()
		a.g = NewGroup(a.g.id, &a.m.cfg)
		a.g.Restore(a.m.store.GroupRecords(a.g.id), time.Now())
		a.afterStep()
		return
	}
	a.persist(eff)
	a.afterStep()
}

// persist proposes eff's records; replies go out once they are applied,
// when the replicator's answer comes back as a persistedMsg. Meanwhile the
// actor serves other requests.
func (a *groupActor) persist(eff Effects) {
	if len(eff.Records) == 0 {
		a.finish(eff, nil)
		return
	}
	select {
	case <-a.stop:
		// Deactivate or Close is stopping this actor: the next
		// coordinator serves from what was committed.
		a.finish(eff, errDeactivated)
		return
	default:
	}
	a.persisting++
	root, self := a.m.root, a.self
	// The store's Apply returns nil or an error: R = any, and an error
	// result arrives as err.
	replication.Propose(a.m.repl, replKey, &persistCmd{recs: eff.Records}, func(_ any, err error) {
		root.Send(self, &persistedMsg{eff: eff, err: err})
	})
}

// finish applies persisted records and delivers replies; after a failed
// write the replies say NOT_COORDINATOR (as Kafka maps a storage error, and
// so that a client whose proposal met a deposed raft leader goes to find
// the new coordinator), and offsets are left as they were.
func (a *groupActor) finish(eff Effects, err error) {
	switch {
	case errors.Is(err, replication.ErrNotLeader), errors.Is(err, replication.ErrOutcomeUnknown), errors.Is(err, errDeactivated):
		// Expected while leadership moves (an unknown outcome: the next
		// coordinator loads whatever was committed).
		a.logger.Warn("persist group records: leadership moved", "records", len(eff.Records), "err", err)
	case err != nil:
		a.logger.Error("persist group records", "records", len(eff.Records), "err", err)
	default:
		a.g.Applied(eff.Records)
	}
	for _, r := range eff.Replies {
		op := a.refs[r.To]
		if op == nil {
			a.logger.Error("reply to an unknown request", "ref", r.To)
			continue
		}
		delete(a.refs, r.To)
		resp := r.Resp
		if err != nil {
			resp = failResponse(resp, op, kerr.NotCoordinator.Code)
		}
		op.reply(resp)
	}
	a.m.notifyShare(a.g.id, eff, err == nil)
}

// failResponse turns a computed answer into an error answer.
func failResponse(resp kmsg.Response, op *opMsg, code int16) kmsg.Response {
	switch r := resp.(type) {
	case *kmsg.OffsetCommitResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				if r.Topics[i].Partitions[j].ErrorCode == 0 {
					r.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
		return r
	case *kmsg.DeleteGroupsResponse:
		for i := range r.Groups {
			if r.Groups[i].ErrorCode == 0 {
				r.Groups[i].ErrorCode = code
			}
		}
		return r
	}
	return op.fail(code)
}

func (a *groupActor) failAll(code int16) {
	for ref, op := range a.refs {
		delete(a.refs, ref)
		op.reply(op.fail(code))
	}
}

// afterStep publishes the group's summary, rearms the timer and retires
// the actor once the group no longer exists and nothing is in flight.
func (a *groupActor) afterStep() {
	if a.retired || a.closed {
		return
	}
	sum, live := a.g.Summary()
	if !live && len(a.refs) == 0 && a.persisting == 0 {
		a.stopTimer()
		a.retired = true
		a.m.retire(a.g.id, a.self)
		return
	}
	if len(a.refs) == 0 && a.persisting == 0 && a.g.Dormant() {
		// Idle: the group rests without an actor (dormant.go).
		a.stopTimer()
		a.retired = true
		a.m.hibernate(a.g.id, a.self, a.g, sum)
		return
	}
	a.m.publish(a.g.id, a.self, sum, live)
	next := a.g.NextDeadline()
	if next.Equal(a.timerAt) {
		return
	}
	a.stopTimer()
	if next.IsZero() {
		return
	}
	a.timerAt = next
	self, root := a.self, a.m.root
	a.timer = time.AfterFunc(time.Until(next), func() { root.Send(self, &tickMsg{}) })
}

func (a *groupActor) stopTimer() {
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	a.timerAt = time.Time{}
}

// shutdown answers everything waiting: the broker is going away.
func (a *groupActor) shutdown() {
	a.stopTimer()
	a.closed = true
	a.failAll(kerr.NotCoordinator.Code)
	a.g.releasePending()
}
