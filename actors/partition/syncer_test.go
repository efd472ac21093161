package partition

import (
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage"
)

// heldSync stands in for storage.Log.Sync: each call announces itself on
// started (with the log end it covers) and waits for the test's verdict on
// its own release channel; a nil verdict runs the real Sync.
type heldSync struct {
	mu      sync.Mutex
	calls   int
	started chan int64 // the log end when each sync began
	release []chan error
}

func newHeldSync(max int) *heldSync {
	h := &heldSync{started: make(chan int64, max)}
	for range max {
		h.release = append(h.release, make(chan error, 1))
	}
	return h
}

func (h *heldSync) sync(lg *storage.Log) error {
	h.mu.Lock()
	n := h.calls
	h.calls++
	h.mu.Unlock()
	h.started <- lg.NextOffset()
	if err := <-h.release[n]; err != nil {
		return err
	}
	return lg.Sync()
}

// releaseAll lets every sync not yet released run (cleanup).
func (h *heldSync) releaseAll() {
	for _, r := range h.release {
		select {
		case r <- nil:
		default: // released already
		}
	}
}

func (h *heldSync) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// openAlways opens a SyncAlways partition on a Local the test holds, with
// hs in place of the log's Sync.
func openAlways(t *testing.T, hs *heldSync) (*Partition, *replication.Local) {
	t.Helper()
	return openHeld(t, hs, SyncAlways)
}

// openHeld is openAlways with the sync policy given.
func openHeld(t *testing.T, hs *heldSync, sync SyncPolicy) (*Partition, *replication.Local) {
	t.Helper()
	sys := quietSystem(t)
	local := replication.NewLocal()
	p, err := Open(sys.Root, Options{Dir: t.TempDir(), Topic: "orders", Config: defaultConfig(t), Repl: local,
		Sync: sync, Logger: slog.New(slog.DiscardHandler), syncLog: hs.sync})
	if err != nil {
		t.Fatal(err)
	}
	return p, local
}

// settle returns once the actor has taken the answers to every produce
// sent before it: the first inspect is taken after those produces were
// proposed (their done callbacks queued in the Local); the Local runs done
// callbacks in order, so one queued after them runs after they sent their
// answers to the actor; and the inspect sent after that is taken after
// those answers.
func settle(t *testing.T, p *Partition, local *replication.Local) {
	t.Helper()
	p.Producers()
	ch := make(chan struct{})
	local.Propose("no such key", nil, func(any, error) { close(ch) })
	await(t, ch)
	p.Producers()
}

type tagged struct {
	i   int
	res ProduceResult
}

func produceTagged(t *testing.T, p *Partition, i int, acks int16, ch chan<- tagged) {
	t.Helper()
	p.Produce(batch(t, -1, 0, 0, 1, false), acks, func(r ProduceResult) { ch <- tagged{i, r} })
}

func expectNone(t *testing.T, ch <-chan tagged) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("produce %d answered (%v) before the sync covering it", r.i, r.res.Err)
	default:
	}
}

func expectAnswer(t *testing.T, ch <-chan tagged, i int, want error) ProduceResult {
	t.Helper()
	r := await(t, ch)
	if r.i != i {
		t.Fatalf("answer for produce %d, want %d: out of order", r.i, i)
	}
	if !errors.Is(r.res.Err, want) && r.res.Err != want {
		t.Fatalf("produce %d: err %v, want %v", i, r.res.Err, want)
	}
	return r.res
}

// TestGroupCommitCoversProducesDuringSlowSync: produces that arrive while
// a sync runs are answered together after the next single sync, which
// began after their appends; nothing is answered, nor visible to
// readers, before a sync covering it succeeded.
func TestGroupCommitCoversProducesDuringSlowSync(t *testing.T) {
	hs := newHeldSync(8)
	p, local := openAlways(t, hs)
	t.Cleanup(func() { hs.releaseAll(); _ = p.Close(false) })
	ch := make(chan tagged, 8)

	produceTagged(t, p, 0, -1, ch)
	if end := await(t, hs.started); end != 1 {
		t.Fatalf("first sync began at log end %d, want 1", end)
	}
	for i := 1; i <= 3; i++ {
		produceTagged(t, p, i, -1, ch)
	}
	settle(t, p, local)
	expectNone(t, ch)
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before any sync finished, want 0", hw)
	}

	hs.release[0] <- nil
	expectAnswer(t, ch, 0, nil)
	if end := await(t, hs.started); end != 4 {
		t.Fatalf("second sync began at log end %d, want 4 (after the three appends)", end)
	}
	expectNone(t, ch)
	if hw := p.HighWatermark(); hw != 1 {
		t.Fatalf("high watermark %d after the first sync, want 1", hw)
	}

	hs.release[1] <- nil
	for i := 1; i <= 3; i++ {
		if res := expectAnswer(t, ch, i, nil); res.BaseOffset != int64(i) {
			t.Fatalf("produce %d at offset %d", i, res.BaseOffset)
		}
	}
	if hw := p.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d after the second sync, want 4", hw)
	}
	settle(t, p, local)
	if n := hs.count(); n != 2 {
		t.Fatalf("%d syncs for 4 produces, want 2", n)
	}
}

// TestGroupCommitSyncErrorFailsWhatItCovered: a failed sync fails exactly
// the durable produces it covered, answers in order, publishes nothing;
// an acks=0 produce queued behind them keeps its own answer, and the
// produces the next sync covers succeed.
func TestGroupCommitSyncErrorFailsWhatItCovered(t *testing.T) {
	hs := newHeldSync(8)
	p, local := openAlways(t, hs)
	t.Cleanup(func() { hs.releaseAll(); _ = p.Close(false) })
	ch := make(chan tagged, 8)

	produceTagged(t, p, 0, -1, ch)
	await(t, hs.started)
	produceTagged(t, p, 1, 1, ch) // next sync
	settle(t, p, local)
	hs.release[0] <- errors.New("disk on fire")
	expectAnswer(t, ch, 0, kerr.KafkaStorageError)
	await(t, hs.started)
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d after a failed sync, want 0", hw)
	}

	produceTagged(t, p, 2, -1, ch) // next but one: the second is running
	produceTagged(t, p, 3, 0, ch)  // behind 2, in order
	settle(t, p, local)
	hs.release[1] <- errors.New("disk still on fire")
	expectAnswer(t, ch, 1, kerr.KafkaStorageError)
	await(t, hs.started)
	expectNone(t, ch)
	hs.release[2] <- nil
	expectAnswer(t, ch, 2, nil)
	expectAnswer(t, ch, 3, nil)
	if hw := p.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d after a good sync, want 4", hw)
	}
}

// TestGroupCommitAcksZeroNotHeld: with nothing waiting for a sync, an
// acks=0 produce is answered at once, but its records become visible only
// after a sync.
func TestGroupCommitAcksZeroNotHeld(t *testing.T) {
	hs := newHeldSync(4)
	p, _ := openAlways(t, hs)
	t.Cleanup(func() { hs.releaseAll(); _ = p.Close(false) })
	ch := make(chan tagged, 4)
	produceTagged(t, p, 0, 0, ch)
	expectAnswer(t, ch, 0, nil)
	await(t, hs.started)
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before the sync, want 0", hw)
	}
	hs.release[0] <- nil
	deadline := time.Now().Add(10 * time.Second)
	for p.HighWatermark() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("high watermark %d 10s after the sync, want 1", p.HighWatermark())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupCommitCloseAnswersAll: Close with a sync in flight and produces
// queued behind it answers every produce, in order, after a sync that
// began after their appends, before it returns. (Close usually takes the
// sync in flight itself; when the actor gets the first sync's outcome
// before the close message, the syncer runs the second and close a third.)
func TestGroupCommitCloseAnswersAll(t *testing.T) {
	hs := newHeldSync(4)
	p, local := openAlways(t, hs)
	ch := make(chan tagged, 8)
	produceTagged(t, p, 0, -1, ch)
	await(t, hs.started)
	produceTagged(t, p, 1, -1, ch)
	produceTagged(t, p, 2, -1, ch)
	settle(t, p, local)

	closed := make(chan error, 1)
	go func() { closed <- p.Close(false) }()
	hs.release[0] <- nil
	expectAnswer(t, ch, 0, nil)
	if end := await(t, hs.started); end != 3 {
		t.Fatalf("the second sync began at log end %d, want 3", end)
	}
	expectNone(t, ch)
	hs.release[1] <- nil
	hs.release[2] <- nil
	expectAnswer(t, ch, 1, nil)
	expectAnswer(t, ch, 2, nil)
	if err := await(t, closed); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommitMarker: a transaction marker with SyncAlways is answered
// after a sync, and a failed one fails it with KAFKA_STORAGE_ERROR.
func TestGroupCommitMarker(t *testing.T) {
	hs := newHeldSync(8)
	p, _ := openAlways(t, hs)
	t.Cleanup(func() { hs.releaseAll(); _ = p.Close(false) })
	const pid = 7
	recs := txnBatch(t, pid, 0, 0, 1)
	ch := make(chan tagged, 2)
	p.Produce(recs, -1, func(r ProduceResult) { ch <- tagged{0, r} })
	await(t, hs.started)
	hs.release[0] <- nil
	expectAnswer(t, ch, 0, nil)

	merr := make(chan error, 1)
	p.WriteTxnMarker(pid, 0, true, 3, func(err error) { merr <- err })
	await(t, hs.started)
	select {
	case err := <-merr:
		t.Fatalf("marker answered (%v) before its sync", err)
	default:
	}
	hs.release[1] <- errors.New("disk on fire")
	if err := await(t, merr); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("marker after a failed sync: %v, want KAFKA_STORAGE_ERROR", err)
	}
}

// TestGroupCommitInFlightSyncCoversEarlierAppends: a produce appended
// before the sync in flight began, but answered by the replicator after it
// began, is covered by that sync: two produces appended back to back take
// one sync, not two.
func TestGroupCommitInFlightSyncCoversEarlierAppends(t *testing.T) {
	hs := newHeldSync(4)
	p, local := openAlways(t, hs)
	t.Cleanup(func() { hs.releaseAll(); _ = p.Close(false) })
	// Hold the Local's callbacks, so that both produces are appended
	// before either answer reaches the actor.
	gate := make(chan struct{})
	local.Propose("no such key", nil, func(any, error) { <-gate })
	ch := make(chan tagged, 4)
	produceTagged(t, p, 0, -1, ch)
	produceTagged(t, p, 1, -1, ch)
	p.Producers() // both appended
	close(gate)
	if end := await(t, hs.started); end != 2 {
		t.Fatalf("the sync began at log end %d, want 2", end)
	}
	settle(t, p, local)
	hs.release[0] <- nil
	expectAnswer(t, ch, 0, nil)
	expectAnswer(t, ch, 1, nil)
	settle(t, p, local)
	if n := hs.count(); n != 1 {
		t.Fatalf("%d syncs for two produces appended before the first began, want 1", n)
	}
}

// TestPeriodicSyncDoesNotHoldAppends: with SyncInterval the periodic fsync
// runs on the syncer, so produces sent while it is held are appended,
// published and answered at once; a second tick while one runs starts one
// more sync after it, not a second at the same time; and the view stays
// the newest one when the held sync ends (it does not publish the older
// view it began with).
func TestPeriodicSyncDoesNotHoldAppends(t *testing.T) {
	hs := newHeldSync(8)
	p, local := openHeld(t, hs, SyncInterval)
	t.Cleanup(func() { hs.releaseAll(); _ = p.Close(false) })
	ch := make(chan tagged, 8)

	produceTagged(t, p, 0, -1, ch)
	expectAnswer(t, ch, 0, nil)
	p.Sync()
	if end := await(t, hs.started); end != 1 {
		t.Fatalf("periodic sync began at log end %d, want 1", end)
	}
	for i := 1; i <= 3; i++ {
		produceTagged(t, p, i, -1, ch)
		if res := expectAnswer(t, ch, i, nil); res.BaseOffset != int64(i) {
			t.Fatalf("produce %d at offset %d while the sync was held", i, res.BaseOffset)
		}
	}
	if hw := p.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d while the sync was held, want 4", hw)
	}
	p.Sync()
	settle(t, p, local)
	if n := hs.count(); n != 1 {
		t.Fatalf("%d syncs running, want 1 (the next waits for it)", n)
	}

	hs.release[0] <- nil
	if end := await(t, hs.started); end != 4 {
		t.Fatalf("second sync began at log end %d, want 4", end)
	}
	settle(t, p, local)
	if hw := p.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d after the held sync ended, want 4", hw)
	}
	hs.release[1] <- nil
}

// TestSyncAlwaysLogReservesNothing: the log of a SyncAlways partition is
// opened, and reconfigured, without block reservation.
func TestSyncAlwaysLogReservesNothing(t *testing.T) {
	cfg := defaultConfig(t)
	if o := storageOptions(cfg, SyncAlways); !o.NoReserve {
		t.Fatal("SyncAlways: the log reserves blocks ahead")
	}
	if o := storageOptions(cfg, SyncInterval); o.NoReserve {
		t.Fatal("SyncInterval: the log reserves nothing")
	}
}
