package share

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/interop/testwait"
)

// newMultiManager serves every partition of topic "t" from lg.
func newMultiManager(t *testing.T, lg Log, repl replication.Replicator, cfg Config) *Manager {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	m, err := NewManager(Options{
		DataDir: t.TempDir(),
		Root:    sys.Root,
		Logger:  quiet,
		Logs: func(topic string, p int32) (Log, bool) {
			if topic != "t" {
				return nil, false
			}
			return lg, true
		},
		Config: func(string) Config { return cfg },
		Repl:   repl,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.Close()
		sys.Shutdown()
	})
	return m
}

// TestWriterCoalesces: the acquisitions of 24 share-partitions asked
// while a write is in flight go out as one command once it lands, and
// each is answered with its records.
func TestWriterCoalesces(t *testing.T) {
	lg := newFakeLog()
	lg.append(10, false, false, -1)
	repl := &heldRepl{local: replication.NewLocal()}
	m := newMultiManager(t, lg, repl, Config{AutoOffsetReset: "earliest"})

	// A write in flight: partition 100's acquisition.
	first := make(chan AcquireResult, 1)
	m.Acquire(AcquireRequest{Key: Key{Group: "g", Topic: "t", Partition: 100}, Member: "a"}, func(r AcquireResult) { first <- r })
	testwait.For(t, "the first write", 10*time.Second, func() bool { return repl.count() == 1 })

	const n = 24
	results := make(chan AcquireResult, n)
	for p := range int32(n) {
		m.Acquire(AcquireRequest{Key: Key{Group: "g", Topic: "t", Partition: p}, Member: "a"}, func(r AcquireResult) { results <- r })
	}
	testwait.For(t, "24 puts queued", 10*time.Second, func() bool {
		m.w.mu.Lock()
		defer m.w.mu.Unlock()
		return len(m.w.mu.queue) == n
	})
	repl.release()
	testwait.For(t, "the coalesced write", 10*time.Second, func() bool { return repl.count() == 1 })
	if s := m.WriteStats(); s != (WriteStats{Proposals: 2, Puts: n + 1}) {
		t.Fatalf("write stats: %+v, want 2 proposals of %d puts", s, n+1)
	}
	repl.release()
	for range n {
		select {
		case r := <-results:
			if r.ErrorCode != 0 || len(r.Acquired) != 1 || r.Acquired[0] != (AcquiredRange{0, 9, 1}) {
				t.Fatalf("acquired: %+v", r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("an acquisition was not answered")
		}
	}
	if r := <-first; r.ErrorCode != 0 || len(r.Acquired) != 1 {
		t.Fatalf("first: %+v", r)
	}
	if s := m.WriteStats(); s.Proposals != 2 {
		t.Fatalf("a write after the answers: %+v", s)
	}
}

// TestWriterFailureAnswersEveryPut: a coalesced write that fails answers
// every share-partition in it with the error, and none adopts its step.
func TestWriterFailureAnswersEveryPut(t *testing.T) {
	lg := newFakeLog()
	lg.append(10, false, false, -1)
	m := newMultiManager(t, lg, failRepl{}, Config{AutoOffsetReset: "earliest"})
	for p := range int32(4) {
		r := wait(t, func(reply func(AcquireResult)) {
			m.Acquire(AcquireRequest{Key: Key{Group: "g", Topic: "t", Partition: p}, Member: "a"}, reply)
		})
		if r.ErrorCode == 0 {
			t.Fatalf("partition %d: a failed write answered success: %+v", p, r)
		}
		if st := m.inspect(Key{Group: "g", Topic: "t", Partition: p}); st.Initialized {
			t.Fatalf("partition %d adopted a state that was not written: %s", p, st)
		}
	}
}

// failRepl fails every write, definitely.
type failRepl struct{}

func (failRepl) Register(string, replication.Applier) {}
func (failRepl) Unregister(string)                    {}
func (failRepl) Propose(_ string, _ replication.Command, done func(any, error)) {
	go done(nil, replication.ErrNotLeader)
}

// TestAcquireAllOneWrite: AcquireAll over 24 share-partitions is one
// write; a share-partition busy with a write of its own does not hold the
// others' (it writes alone, after), and every request is answered once.
func TestAcquireAllOneWrite(t *testing.T) {
	lg := newFakeLog()
	lg.append(10, false, false, -1)
	repl := &heldRepl{local: replication.NewLocal()}
	m := newMultiManager(t, lg, repl, Config{AutoOffsetReset: "earliest"})
	pk := func(p int32) Key { return Key{Group: "g", Topic: "t", Partition: p} }

	const n = 24
	var reqs []AcquireRequest
	for p := range int32(n) {
		reqs = append(reqs, AcquireRequest{Key: pk(p), Member: "a", MaxRecords: 5, RecordLimit: true})
	}
	got := make(chan AcquireResult, 2*n)
	m.AcquireAll(reqs, func(i int, r AcquireResult) { got <- r })
	testwait.For(t, "one write", 10*time.Second, func() bool { return repl.count() == 1 })
	if s := m.WriteStats(); s != (WriteStats{Proposals: 1, Puts: n}) {
		t.Fatalf("write stats: %+v, want 1 proposal of %d puts", s, n)
	}
	repl.release()
	for range n {
		if r := <-got; r.ErrorCode != 0 || len(r.Acquired) != 1 || r.Acquired[0] != (AcquiredRange{0, 4, 1}) {
			t.Fatalf("acquired: %+v", r)
		}
	}

	// Partition 0 busy with an ack's write in flight; a gather over 0
	// and 1 writes 1 without waiting, then 0 alone.
	acked := make(chan int16, 2)
	m.Acknowledge(pk(0), "a", []AckBatch{{0, 4, []AckType{AckAccept}}}, func(c int16) { acked <- c })
	testwait.For(t, "the ack's write", 10*time.Second, func() bool { return repl.count() == 1 })
	m.AcquireAll(reqs[:2], func(i int, r AcquireResult) { got <- r })
	testwait.For(t, "partition 1's put queued", 10*time.Second, func() bool {
		m.w.mu.Lock()
		defer m.w.mu.Unlock()
		return len(m.w.mu.queue) == 1
	})
	repl.release() // the ack; then partition 1's write goes out
	if c := <-acked; c != 0 {
		t.Fatalf("ack: %d", c)
	}
	// Partition 0's acquisition, stepped once the ack landed, goes out
	// with partition 1's or after it.
	for range 2 {
		var r AcquireResult
		testwait.For(t, "an acquisition answered", 10*time.Second, func() bool {
			repl.release()
			select {
			case r = <-got:
				return true
			default:
				return false
			}
		})
		if r.ErrorCode != 0 || len(r.Acquired) != 1 || r.Acquired[0] != (AcquiredRange{5, 9, 1}) {
			t.Fatalf("second acquisition: %+v", r)
		}
	}
	if s := m.WriteStats(); s.Proposals < 3 || s.Proposals > 4 || s.Puts != n+3 {
		t.Fatalf("write stats: %+v, want the gather, the ack, then partitions 1 and 0 (together or not)", s)
	}
}
