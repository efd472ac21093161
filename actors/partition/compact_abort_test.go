package partition

import (
	"encoding/binary"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/interop/testwait"
	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// txnWriter writes transactions to an actor's state log, as applied
// commands would.
type txnWriter struct {
	t   *testing.T
	a   *partitionActor
	now int64
	seq map[int64]int32
}

func (w *txnWriter) data(pid int64, kv ...string) int64 {
	w.t.Helper()
	var recs []recordbatch.Record
	for i := 0; i < len(kv); i += 2 {
		recs = append(recs, recordbatch.Record{OffsetDelta: int32(i / 2), Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	b, err := recordbatch.Build(recordbatch.Header{Attributes: recordbatch.AttrTransactional, FirstTimestamp: w.now, MaxTimestamp: w.now,
		ProducerID: pid, ProducerEpoch: 0, BaseSequence: w.seq[pid]}, recs)
	if err != nil {
		w.t.Fatal(err)
	}
	w.seq[pid] += int32(len(recs))
	res := w.a.sl.produce(b, w.now)
	if res.Err != nil {
		w.t.Fatalf("transactional produce: %v", res.Err)
	}
	return res.BaseOffset
}

func (w *txnWriter) marker(pid int64, commit bool) int64 {
	w.t.Helper()
	res := w.a.sl.writeMarker(pid, 0, commit, 0, w.now)
	if res.Err != nil || res.Offset < 0 {
		w.t.Fatalf("marker: %+v", res)
	}
	return res.Offset
}

// readCommittedView reads the log below the view's last stable offset as
// Kafka's consumer does with read_committed, handed the view's aborted
// transactions: offset -> key=value. It fails on a transaction the view
// lists whose ABORT marker is not in the log (the consumer would skip the
// producer's later transactions).
func readCommittedView(t *testing.T, lg *storage.Log, v *ReadView) map[int64]string {
	t.Helper()
	queue := v.AbortedIn(lg.StartOffset(), v.LastStable)
	bs := batchesOf(t, lg)
	for _, a := range queue {
		if _, ok := bs[a.LastOffset]; !ok {
			t.Fatalf("the view lists aborted transaction %+v, its marker is not in the log", a)
		}
	}
	skipping := map[int64]bool{}
	out := map[int64]string{}
	for _, base := range slices.Sorted(maps.Keys(bs)) {
		b := bs[base]
		h, _ := recordbatch.ParseHeader(b)
		if h.LastOffset() >= v.LastStable {
			break
		}
		for len(queue) > 0 && queue[0].FirstOffset <= h.LastOffset() {
			skipping[queue[0].ProducerID] = true
			queue = queue[1:]
		}
		recs, err := recordbatch.Records(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.IsControl() {
			if len(recs) > 0 && len(recs[0].Key) >= 4 && binary.BigEndian.Uint16(recs[0].Key[2:]) == markerAbort {
				delete(skipping, h.ProducerID)
			}
			continue
		}
		if h.IsTransactional() && skipping[h.ProducerID] {
			continue
		}
		for _, r := range recs {
			out[h.BaseOffset+int64(r.OffsetDelta)] = string(r.Key) + "=" + string(r.Value)
		}
	}
	return out
}

// maintainOnce runs a leader's maintenance and waits for its compaction
// proposal's answer (Local applies at once, answers on its own goroutine;
// until then the next maintenance proposes no pass).
func maintainOnce(t *testing.T, a *partitionActor) {
	t.Helper()
	a.maintain(true)
	testwait.For(t, "the compaction proposal's answer", testwait.Default, func() bool { return !a.compacting.Load() })
}

// TestAbortMarkersForgottenThenDropped: maintenance passes on the actor
// remove an aborted transaction's records, stamp its ABORT marker, drop
// the transaction from the aborted list (and the snapshot), and only then
// drop the marker. After every pass a read_committed reader given the
// fetch's view reads the committed records (the producer's next
// transaction included) and no aborted one, whether it takes the view
// before or after the pass; a restart from the snapshot or from the log
// alone lists nothing.
func TestAbortMarkersForgottenThenDropped(t *testing.T) {
	local := cluster.NewLocal()
	a := compactActor(t, 700, local)
	local.Register(a.key, a)
	dir := t.TempDir()
	a.sl.snapshotPath = filepath.Join(dir, producerSnapshotFile)
	w := &txnWriter{t: t, a: a, now: time.Now().UnixMilli(), seq: map[int64]int32{}}
	const p = 2
	w.data(p, "x", "aborted", "y", "aborted")
	abort := w.marker(p, false)
	w.data(p, "z", "committed")
	w.marker(p, true)
	produceKeyed(t, 0, 150, a)
	if n := len(a.sl.st.Aborted()); n != 1 {
		t.Fatalf("%d aborted transactions listed, want 1", n)
	}

	var stamped, forgotten, dropped bool
	for pass := 0; pass < 10 && !dropped; pass++ {
		before := a.sl.st.View()
		maintainOnce(t, a)
		after := a.sl.st.View()
		bs := batchesOf(t, a.p.log)
		for _, v := range []*ReadView{before, after} {
			got := readCommittedView(t, a.p.log, v)
			if !slices.Contains(slices.Collect(maps.Values(got)), "z=committed") {
				t.Fatalf("pass %d: read_committed misses the producer's committed record: %v", pass, got)
			}
			for off, r := range got {
				if r == "x=aborted" || r == "y=aborted" {
					t.Fatalf("pass %d: read_committed reads aborted %s at %d", pass, r, off)
				}
			}
		}
		b, ok := bs[abort]
		listed := len(after.AbortedIn(0, after.LastStable)) > 0
		switch {
		case ok && listed:
			h, _ := recordbatch.ParseHeader(b)
			stamped = stamped || h.HasDeleteHorizon()
		case ok && !listed:
			if !stamped {
				t.Fatalf("pass %d: transaction forgotten before its marker was stamped", pass)
			}
			forgotten = true
		case !ok && listed:
			t.Fatalf("pass %d: ABORT marker dropped while the transaction is listed", pass)
		default:
			if !forgotten {
				t.Fatalf("pass %d: marker dropped in the pass that forgot its transaction", pass)
			}
			dropped = true
		}
	}
	if !dropped {
		t.Fatalf("ABORT marker still in the log after 10 passes (stamped %v, forgotten %v)", stamped, forgotten)
	}

	a.snapshot()
	for _, snap := range []string{a.sl.snapshotPath, ""} {
		sl, err := openStateLog(a.p.log, a.sl.st.Config(), 0, snap, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ab := sl.st.Aborted(); len(ab) != 0 {
			t.Fatalf("restart (snapshot %q): aborted list %v, want empty", snap, ab)
		}
		if got := readCommittedView(t, a.p.log, sl.st.View()); !slices.Contains(slices.Collect(maps.Values(got)), "z=committed") {
			t.Fatalf("restart (snapshot %q): read_committed misses the committed record", snap)
		}
	}
}

// TestAbortMarkerKeptWhileSnapshotStale: a pass that could drop the
// marker of a forgotten transaction does nothing while the snapshot on
// disk may still list it (its write failed): a restart from that snapshot
// must find the marker. Once a snapshot is written the marker goes.
func TestAbortMarkerKeptWhileSnapshotStale(t *testing.T) {
	local := cluster.NewLocal()
	a := compactActor(t, 700, local)
	local.Register(a.key, a)
	good := filepath.Join(t.TempDir(), producerSnapshotFile)
	a.sl.snapshotPath = good
	w := &txnWriter{t: t, a: a, now: time.Now().UnixMilli(), seq: map[int64]int32{}}
	w.data(3, "x", "aborted")
	abort := w.marker(3, false)
	w.data(3, "z", "committed")
	w.marker(3, true)
	produceKeyed(t, 0, 150, a)
	a.snapshot()

	// Passes until the transaction is forgotten, with snapshots failing
	// from the start (a directory that does not exist).
	a.sl.snapshotPath = filepath.Join(t.TempDir(), "missing", producerSnapshotFile)
	for pass := 0; pass < 10 && len(a.sl.st.Aborted()) > 0; pass++ {
		maintainOnce(t, a)
	}
	if len(a.sl.st.Aborted()) > 0 {
		t.Fatal("transaction not forgotten after 10 passes")
	}
	for range 3 {
		maintainOnce(t, a)
		if _, ok := batchesOf(t, a.p.log)[abort]; !ok {
			t.Fatal("ABORT marker dropped while the snapshot on disk still lists its transaction")
		}
	}
	// The old snapshot, with the marker still there, is a correct state.
	sl, err := openStateLog(a.p.log, a.sl.st.Config(), 0, good, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sl.st.Aborted()) != 1 {
		t.Fatalf("restart from the old snapshot lists %v", sl.st.Aborted())
	}
	readCommittedView(t, a.p.log, sl.st.View())

	a.sl.snapshotPath = good
	for pass := 0; pass < 10; pass++ {
		maintainOnce(t, a)
		if _, ok := batchesOf(t, a.p.log)[abort]; !ok {
			return
		}
	}
	t.Fatal("ABORT marker kept after the snapshot was written")
}

// TestCompactionDropsExpiredProducersLastBatch: an idempotent producer's
// only batch, emptied by compaction, is kept while the producer is held
// (its sequence) and goes in the first pass after a
// partition.expire_producers command dropped the producer.
func TestCompactionDropsExpiredProducersLastBatch(t *testing.T) {
	local := cluster.NewLocal()
	a := compactActor(t, 700, local)
	local.Register(a.key, a)
	now := time.Now().UnixMilli()
	b, err := recordbatch.Build(recordbatch.Header{FirstTimestamp: now, MaxTimestamp: now, ProducerID: 9, ProducerEpoch: 0, BaseSequence: 0},
		[]recordbatch.Record{{Key: []byte("k0"), Value: []byte("idempotent")}})
	if err != nil {
		t.Fatal(err)
	}
	res := a.sl.produce(b, now)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	idem := res.BaseOffset
	produceKeyed(t, 0, 150, a) // supersedes k0
	maintainOnce(t, a)
	if bt, ok := batchesOf(t, a.p.log)[idem]; !ok {
		t.Fatal("the held producer's emptied last batch went")
	} else if h, _ := recordbatch.ParseHeader(bt); h.NumRecords != 0 {
		t.Fatalf("the producer's batch kept %d records, its key was superseded", h.NumRecords)
	}
	if r := a.expire(&expireCmd{now: time.Now().Add(time.Hour).UnixNano(), expirationMs: 1}); r.expired == 0 {
		t.Fatal("no producer expired")
	}
	produceKeyed(t, 1, 150, a) // something dirty, so a pass is due
	maintainOnce(t, a)
	if _, ok := batchesOf(t, a.p.log)[idem]; ok {
		t.Fatal("the expired producer's emptied last batch kept")
	}
}
