package txn

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// appendTo returns Append's appendFn for the fake partition: it records the
// batch in the same list as the markers, so their order is the order the
// partition would take them in.
func appendTo(p *fakePartition, pid int64, epoch int16) func() {
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.markers = append(p.markers, fmt.Sprintf("batch %d/%d", pid, epoch))
	}
}

func (h *harness) append(id string, pid int64, epoch int16, tp TopicPartition, add bool) error {
	return wait(h.t, "append", func(r func(error)) {
		h.c.Append(id, pid, epoch, tp, add, func() { appendTo(h.parts[tp], pid, epoch)(); r(nil) }, r)
	})
}

// TestAppendChecksAndOrdersBeforeMarkers: a batch for a partition not in
// the transaction is refused (TV1) or adds it (TV2); batches let through
// reach the partition before the transaction's marker, even when they race
// with the EndTxn that writes it: none lands after.
func TestAppendChecksAndOrdersBeforeMarkers(t *testing.T) {
	h := newHarness(t, nil)
	mustOK(t, "init", h.init("a", 60000))
	if err := h.append("a", 101, 0, t0, false); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("TV1 batch to a partition not added: %v", err)
	}
	if got := h.parts[t0].got(); len(got) != 0 {
		t.Fatalf("a refused batch reached the partition: %v", got)
	}
	if err := h.append("a", 101, 0, t0, true); err != nil {
		t.Fatalf("TV2 batch (implicit add): %v", err)
	}
	if tx, _ := h.describe("a"); tx.State != StateOngoing || len(tx.Partitions) != 1 || tx.Partitions[0] != t0 {
		t.Fatalf("after the implicit add: %+v", tx)
	}

	// Batches racing with the end: each is either taken before the
	// marker or refused.
	var wg sync.WaitGroup
	refused := make(chan error, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan struct{})
			h.c.Append("a", 101, 0, t0, false, func() { appendTo(h.parts[t0], 101, 0)(); close(done) }, func(err error) { refused <- err; close(done) })
			<-done
		}()
	}
	end := wait(t, "end", func(r func(Result)) { h.c.EndTxn("a", 101, 0, true, true, r) })
	mustOK(t, "end v5", end)
	wg.Wait()
	close(refused)
	for err := range refused {
		if !errors.Is(err, kerr.ConcurrentTransactions) && !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidTxnState) {
			t.Fatalf("a racing batch refused with %v", err)
		}
	}
	got := h.parts[t0].got()
	if last := got[len(got)-1]; last != "commit 101/1" {
		t.Fatalf("the partition took %v: the commit marker is not last", got)
	}
	if end.ProducerEpoch != 1 || h.c.Stats().EndTxnV5 != 1 || h.c.Stats().ImplicitAdds != 1 {
		t.Fatalf("end %+v, stats %+v", end, h.c.Stats())
	}
	t.Logf("%d of 101 batches taken before the marker, the rest refused", len(got)-1)
}
