package partition

import (
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/replication"
)

// TestTxnGuard: a transactional batch checked elsewhere is appended while
// no marker of its producer was proposed since its check began; after
// one, it is refused INVALID_TXN_STATE and nothing is appended, while
// another producer's guard still holds.
func TestTxnGuard(t *testing.T) {
	sys := quietSystem(t)
	p := openWith(t, sys, replication.NewLocal())
	produce := func(pid int64, seq int32, guard uint64) ProduceResult {
		t.Helper()
		ch := make(chan ProduceResult, 1)
		p.ProduceGuarded(nil, txnBatch(t, pid, 0, seq, 1), -1, pid, 0, guard, func(r ProduceResult) { ch <- r })
		return await(t, ch)
	}
	g1 := p.TxnGuard(1)
	if r := produce(1, 0, g1); r.Err != nil {
		t.Fatalf("guarded produce with no marker since: %v", r.Err)
	}
	stale := p.TxnGuard(1)
	other := p.TxnGuard(2)
	merr := make(chan error, 1)
	p.WriteTxnMarker(1, 0, false, 0, func(err error) { merr <- err })
	if err := await(t, merr); err != nil {
		t.Fatal(err)
	}
	end := p.HighWatermark()
	if r := produce(1, 1, stale); r.Err != kerr.InvalidTxnState {
		t.Fatalf("guarded produce after the producer's marker: %v, want INVALID_TXN_STATE", r.Err)
	}
	if hw := p.HighWatermark(); hw != end {
		t.Fatalf("a refused batch moved the log end from %d to %d", end, hw)
	}
	if r := produce(2, 0, other); r.Err != nil {
		t.Fatalf("another producer's guard: %v", r.Err)
	}
	if r := produce(1, 1, p.TxnGuard(1)); r.Err != nil {
		t.Fatalf("a guard taken after the marker: %v", r.Err)
	}
}

// termedLocal is a Local replicator with a raft term the test sets.
type termedLocal struct {
	replication.Replicator
	term atomic.Int32
}

func (r *termedLocal) Term() int32 { return r.term.Load() }

// TestProduceOrCheck: a producer's first batch in a transaction is handed
// to a check, and so is every batch behind it until the check is over;
// once a checked batch is proposed, the producer's batches at that epoch
// go straight to the log (Kafka checks only a producer with no ongoing
// transaction on the partition), until a marker of the producer, a new
// epoch or a new raft term.
func TestProduceOrCheck(t *testing.T) {
	sys := quietSystem(t)
	repl := &termedLocal{Replicator: replication.NewLocal()}
	repl.term.Store(3)
	p := openWith(t, sys, repl)
	type outcome struct {
		res     ProduceResult
		checked bool
		guard   uint64
	}
	send := func(pid int64, epoch int16, seq int32) chan outcome {
		ch := make(chan outcome, 1)
		p.ProduceOrCheck(nil, txnBatch(t, pid, epoch, seq, 1), -1, pid, epoch,
			func(r ProduceResult) { ch <- outcome{res: r} },
			func(guard uint64) { ch <- outcome{checked: true, guard: guard} })
		return ch
	}
	guarded := func(pid int64, epoch int16, seq int32, guard uint64) {
		t.Helper()
		ch := make(chan ProduceResult, 1)
		p.ProduceGuarded(nil, txnBatch(t, pid, epoch, seq, 1), -1, pid, epoch, guard, func(r ProduceResult) { ch <- r })
		if r := await(t, ch); r.Err != nil {
			t.Fatalf("checked batch %d: %v", seq, r.Err)
		}
	}
	wantChecked := func(what string, ch chan outcome) uint64 {
		t.Helper()
		o := await(t, ch)
		if !o.checked {
			t.Fatalf("%s: appended (%v), want a check", what, o.res.Err)
		}
		return o.guard
	}
	wantAppended := func(what string, ch chan outcome) {
		t.Helper()
		o := await(t, ch)
		if o.checked || o.res.Err != nil {
			t.Fatalf("%s: checked %v, err %v; want appended", what, o.checked, o.res.Err)
		}
	}

	// The first batch and the one behind it are both checked.
	g0 := wantChecked("first batch", send(1, 0, 0))
	g1 := wantChecked("batch behind a check", send(1, 0, 1))
	guarded(1, 0, 0, g0)
	guarded(1, 0, 1, g1)
	// Known open now: straight to the log.
	wantAppended("batch of an open transaction", send(1, 0, 2))
	// Another producer is not open.
	wantChecked("another producer", send(2, 0, 0))
	p.CheckAbandoned(2)
	// A new raft term: checked again (another leader may have ended it).
	repl.term.Store(4)
	g := wantChecked("batch in a new term", send(1, 0, 3))
	guarded(1, 0, 3, g)
	wantAppended("open again in this term", send(1, 0, 4))
	// The producer's marker ends it: its next transaction is checked.
	merr := make(chan error, 1)
	p.WriteTxnMarker(1, 0, true, 0, func(err error) { merr <- err })
	if err := await(t, merr); err != nil {
		t.Fatal(err)
	}
	g = wantChecked("batch after the marker", send(1, 0, 5))
	guarded(1, 0, 5, g)
	// A new epoch (transaction version 2 bumps it every transaction) is
	// checked too.
	wantChecked("batch at a new epoch", send(1, 1, 0))
	p.CheckAbandoned(1)
	wantChecked("after an abandoned check, still not open at the new epoch", send(1, 1, 0))
}
