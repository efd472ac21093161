package clustertest

import (
	"errors"
	"testing"
	"time"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/interop/testwait"
)

type echoCmd struct{ b byte }

func (c *echoCmd) CommandKind() string           { return "clustertest.echo" }
func (c *echoCmd) AppendCommand(b []byte) []byte { return append(b, c.b) }

func init() {
	replication.RegisterDecoder("clustertest.echo", func(p []byte) (replication.Command, error) {
		if len(p) != 1 {
			return nil, errors.New("bad echo")
		}
		return &echoCmd{b: p[0]}, nil
	})
}

// echo is owned by the fake's FSM goroutine.
type echo struct{}

func (echo) Apply(cmd replication.Command) any { return int(cmd.(*echoCmd).b) }

type outcome struct {
	res    any
	err    error
	inline bool
}

// propose proposes on n and reports the outcome; done waits until Propose
// has returned (a done called inline would fail the wait, not hang).
func propose(n *FakeNode, b byte) <-chan outcome {
	ch := make(chan outcome, 2)
	returned := make(chan struct{})
	n.Propose("k", &echoCmd{b: b}, func(res any, err error) {
		o := outcome{res: res, err: err}
		select {
		case <-returned:
		case <-time.After(5 * time.Second):
			o.inline = true
		}
		ch <- o
	})
	close(returned)
	return ch
}

func wait(t *testing.T, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		if o.inline {
			t.Fatal("done ran inside Propose")
		}
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
	panic("unreachable")
}

// TestFakeRaftContract: commits answer the proposer's result, refusals are
// definite (ErrNotLeader) and off the proposer's goroutine, and entries
// held at Close are unknown outcomes, never successes or refusals.
func TestFakeRaftContract(t *testing.T) {
	r := New(t, 2)
	for i := range 2 {
		r.Node(i).Register("k", echo{})
	}
	if o := wait(t, propose(r.Node(0), 7)); o.err != nil || o.res != 7 {
		t.Fatalf("commit: %+v", o)
	}
	if o := wait(t, propose(r.Node(1), 8)); !errors.Is(o.err, replication.ErrNotLeader) || errors.Is(o.err, replication.ErrOutcomeUnknown) {
		t.Fatalf("follower: %+v", o)
	}
	testwait.For(t, "the refusal to be counted", testwait.Default, func() bool { return r.Refused() == 1 })

	r.SetStall(true)
	held := propose(r.Node(0), 9)
	testwait.For(t, "the proposal to be held", testwait.Default, func() bool { return r.HeldCount() == 1 })
	r.Close()
	if o := wait(t, held); !errors.Is(o.err, replication.ErrOutcomeUnknown) || errors.Is(o.err, replication.ErrNotLeader) {
		t.Fatalf("held at close: %+v", o)
	}
	if o := wait(t, propose(r.Node(0), 10)); !errors.Is(o.err, replication.ErrNotLeader) {
		t.Fatalf("after close: %+v", o)
	}
}
