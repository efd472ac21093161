package partition

import (
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
		p.ProduceGuarded(nil, txnBatch(t, pid, 0, seq, 1), -1, pid, guard, func(r ProduceResult) { ch <- r })
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
