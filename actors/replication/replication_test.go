package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// contractCheck wraps done callbacks to check the contract as a proposer
// sees it: each done must not run until the proposer has come back from
// Propose and said so (a done called inline would wait for a Propose that
// cannot return: it fails after the deadline instead of hanging), and runs
// exactly once.
type contractCheck struct {
	t      *testing.T
	wg     sync.WaitGroup
	mu     sync.Mutex
	counts map[int]int
}

func newContractCheck(t *testing.T) *contractCheck {
	return &contractCheck{t: t, counts: map[int]int{}}
}

// propose proposes through r and returns once Propose has returned; then
// done may run. got is called with the outcome.
func (c *contractCheck) propose(r Replicator, id int, key string, cmd Command, got func(res any, err error)) {
	returned := make(chan struct{})
	c.wg.Add(1)
	r.Propose(key, cmd, func(res any, err error) {
		defer c.wg.Done()
		select {
		case <-returned:
		case <-time.After(5 * time.Second):
			c.t.Errorf("proposal %d: done ran while Propose had not returned (inline)", id)
		}
		c.mu.Lock()
		c.counts[id]++
		c.mu.Unlock()
		got(res, err)
	})
	close(returned)
}

// wait waits for every done and checks each ran exactly once.
func (c *contractCheck) wait(n int) {
	c.t.Helper()
	ch := make(chan struct{})
	go func() { c.wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		c.t.Fatal("done callbacks missing after 20s")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range n {
		if c.counts[id] != 1 {
			c.t.Errorf("proposal %d: done ran %d times", id, c.counts[id])
		}
	}
}

type counter struct{ n int } // owned by the proposing goroutine

func (c *counter) Apply(cmd Command) any {
	switch v := cmd.(type) {
	case int:
		c.n += v
		return c.n
	case string:
		panic(v)
	case error:
		return v
	}
	return fmt.Sprintf("unexpected %T", cmd)
}

// TestLocalContract: answers never inline, exactly once, in proposal
// order, with Apply's result; Apply itself runs on the proposer's
// goroutine (its state is the proposer's).
func TestLocalContract(t *testing.T) {
	l := NewLocal()
	c := &counter{}
	l.Register("k", c)
	check := newContractCheck(t)
	const n = 500
	var mu sync.Mutex
	var got []int
	for i := range n {
		check.propose(l, i, "k", 1, func(res any, err error) {
			if err != nil {
				t.Errorf("proposal %d: %v", i, err)
				return
			}
			mu.Lock()
			got = append(got, res.(int))
			mu.Unlock()
		})
		// Applied at once, on this goroutine.
		if c.n != i+1 {
			t.Fatalf("after proposal %d the counter is %d", i, c.n)
		}
	}
	check.wait(n)
	for i, v := range got {
		if v != i+1 {
			t.Fatalf("answer %d is %d: answers out of order", i, v)
		}
	}
}

// TestLocalFailures: no applier is a definite failure; a panicking Apply
// is an unknown outcome, never success or a definite failure; both are
// answered off the proposer's goroutine.
func TestLocalFailures(t *testing.T) {
	l := NewLocal()
	l.Register("k", &counter{})
	check := newContractCheck(t)
	check.propose(l, 0, "missing", 1, func(res any, err error) {
		if !errors.Is(err, ErrNoApplier) || errors.Is(err, ErrOutcomeUnknown) || res != nil {
			t.Errorf("no applier: (%v, %v)", res, err)
		}
	})
	check.propose(l, 1, "k", "boom", func(res any, err error) {
		if !errors.Is(err, ErrOutcomeUnknown) || res != nil {
			t.Errorf("apply panic: (%v, %v)", res, err)
		}
	})
	l.Unregister("k")
	check.propose(l, 2, "k", 1, func(_ any, err error) {
		if !errors.Is(err, ErrNoApplier) {
			t.Errorf("unregistered: %v", err)
		}
	})
	check.wait(3)
}

func TestAs(t *testing.T) {
	refused := errors.New("refused by apply")
	repl := errors.New("replicator failed")
	if v, err := As[int](7, nil); v != 7 || err != nil {
		t.Errorf("int: (%v, %v)", v, err)
	}
	if v, err := As[int](refused, nil); v != 0 || err != refused {
		t.Errorf("error result: (%v, %v)", v, err)
	}
	if v, err := As[int](7, repl); v != 0 || err != repl {
		t.Errorf("replicator error: (%v, %v)", v, err)
	}
	if _, err := As[int]("seven", nil); !errors.Is(err, ErrUnexpectedResult) {
		t.Errorf("wrong type: %v", err)
	}
	if _, err := As[int](nil, nil); !errors.Is(err, ErrUnexpectedResult) {
		t.Errorf("nil for a value type: %v", err)
	}
	if v, err := As[error](nil, nil); v != nil || err != nil {
		t.Errorf("nil for error: (%v, %v)", v, err)
	}
	if v, err := As[any](nil, nil); v != nil || err != nil {
		t.Errorf("nil for any: (%v, %v)", v, err)
	}
	if v, err := As[[]error]([]error{nil}, nil); len(v) != 1 || err != nil {
		t.Errorf("slice: (%v, %v)", v, err)
	}
}

// TestProposeTyped: the typed layer keeps the contract and hands a wrong
// result type over as an error, not a panic.
func TestProposeTyped(t *testing.T) {
	l := NewLocal()
	l.Register("k", &counter{})
	done := make(chan error, 2)
	returned := make(chan struct{})
	Propose(l, "k", 2, func(v int, err error) {
		select {
		case <-returned:
		case <-time.After(5 * time.Second):
			t.Error("typed done ran inside Propose")
		}
		if v != 2 || err != nil {
			err = fmt.Errorf("got (%v, %v)", v, err)
		}
		done <- err
	})
	close(returned)
	Propose(l, "k", 1, func(v string, err error) {
		if !errors.Is(err, ErrUnexpectedResult) {
			err = fmt.Errorf("wrong type: got (%q, %v)", v, err)
		} else {
			err = nil
		}
		done <- err
	})
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no answer")
		}
	}
}

// scripted answers every proposal with a fixed outcome, on another
// goroutine, or never.
type scripted struct {
	res  any
	err  error
	hang bool
}

func (r *scripted) Register(string, Applier) {}
func (r *scripted) Unregister(string)        {}
func (r *scripted) Propose(_ string, _ Command, done func(any, error)) {
	if !r.hang {
		go done(r.res, r.err)
	}
}

func TestProposeWait(t *testing.T) {
	refused := errors.New("refused by apply")
	unknown := fmt.Errorf("leadership lost: %w", ErrOutcomeUnknown)
	cases := []struct {
		name    string
		repl    *scripted
		wantRes any
		wantIs  error
	}{
		{"applied", &scripted{res: 7}, 7, nil},
		{"apply error", &scripted{res: refused}, nil, refused},
		{"not leader", &scripted{err: ErrNotLeader}, nil, ErrNotLeader},
		{"unknown", &scripted{err: unknown}, nil, ErrOutcomeUnknown},
		{"timed out", &scripted{hang: true}, nil, ErrOutcomeUnknown},
	}
	for _, c := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		res, err := ProposeWait[any](ctx, c.repl, "k", nil)
		cancel()
		if res != c.wantRes || !errors.Is(err, c.wantIs) || (c.wantIs == nil) != (err == nil) {
			t.Errorf("%s: got (%v, %v), want (%v, %v)", c.name, res, err, c.wantRes, c.wantIs)
		}
		if c.repl.hang && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v does not say the deadline passed", c.name, err)
		}
	}
}

func TestAwaitCancel(t *testing.T) {
	stop := make(chan struct{})
	close(stop)
	if _, err := Await[int](&scripted{hang: true}, "k", nil, stop); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("canceled wait: %v", err)
	}
}

// TestCallbacksOrderAndPanic: callbacks run in the order added, one at a
// time, and a panicking one does not stop the others.
func TestCallbacksOrderAndPanic(t *testing.T) {
	var c Callbacks
	const n = 1000
	var running atomic.Int32
	got := make(chan int, n)
	for i := range n {
		c.Add(func(res any, _ error) {
			if running.Add(1) != 1 {
				t.Error("two callbacks at once")
			}
			defer running.Add(-1)
			if res.(int)%100 == 0 {
				panic("callback bug")
			}
			got <- res.(int)
		}, i, nil)
	}
	want := 0
	for want < n {
		if want%100 == 0 {
			want++
			continue
		}
		select {
		case v := <-got:
			if v != want {
				t.Fatalf("callback %d ran when %d was due", v, want)
			}
			want++
		case <-time.After(10 * time.Second):
			t.Fatalf("callback %d missing", want)
		}
	}
}
