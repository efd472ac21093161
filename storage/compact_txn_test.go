package storage

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
	"testing"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// txnLog is a script of a partition's writes and what its state knows of
// them: the aborted transactions and the last stable offset.
type txnLog struct {
	t       *testing.T
	logs    []*Log
	ts      int64
	aborted []AbortedRange
	open    map[int64]int64 // producer -> first offset of its open transaction
	seq     map[int64]int32
	expired map[int64]bool // producers the partition's state no longer holds
}

func (x *txnLog) append(b []byte) (base int64) {
	x.t.Helper()
	for i, l := range x.logs {
		bb, _, err := l.AppendAt(slices.Clone(b), 5000)
		if err != nil {
			x.t.Fatal(err)
		}
		if i == 0 {
			base = bb
		} else if bb != base {
			x.t.Fatalf("log %d appended at %d, log 0 at %d", i, bb, base)
		}
	}
	return base
}

// data appends one batch of key=value pairs ("" value: a tombstone) from
// pid: transactional when txn, idempotent when pid >= 0, plain otherwise.
func (x *txnLog) data(pid int64, txn bool, kv ...string) int64 {
	x.t.Helper()
	x.ts++
	h := recordbatch.Header{FirstTimestamp: x.ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if pid >= 0 {
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = pid, 3, x.seq[pid]
		x.seq[pid] += int32(len(kv) / 2)
	}
	if txn {
		h.Attributes |= recordbatch.AttrTransactional
	}
	var recs []recordbatch.Record
	for i := 0; i < len(kv); i += 2 {
		recs = append(recs, recordbatch.Record{OffsetDelta: int32(i / 2), Key: []byte(kv[i]), Value: []byte(kv[i+1]), ValueNull: kv[i+1] == ""})
	}
	b, err := recordbatch.Build(h, recs)
	if err != nil {
		x.t.Fatal(err)
	}
	base := x.append(b)
	if _, ok := x.open[pid]; txn && !ok {
		x.open[pid] = base
	}
	return base
}

// marker ends pid's transaction.
func (x *txnLog) marker(pid int64, commit bool) int64 {
	x.t.Helper()
	x.ts++
	typ := uint16(controlAbort)
	if commit {
		typ = controlCommit
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), typ)
	val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 7)
	b, err := recordbatch.Build(recordbatch.Header{Attributes: recordbatch.AttrTransactional | recordbatch.AttrControl,
		FirstTimestamp: x.ts, ProducerID: pid, ProducerEpoch: 3, BaseSequence: -1},
		[]recordbatch.Record{{Key: key, Value: val}})
	if err != nil {
		x.t.Fatal(err)
	}
	off := x.append(b)
	if !commit {
		x.aborted = append(x.aborted, AbortedRange{ProducerID: pid, FirstOffset: x.open[pid], LastOffset: off})
	}
	delete(x.open, pid)
	return off
}

func (x *txnLog) lastStable() int64 {
	lso := x.logs[0].NextOffset()
	for _, f := range x.open {
		lso = min(lso, f)
	}
	return lso
}

func (x *txnLog) txns() *Transactions {
	return &Transactions{LastStable: x.lastStable(), Aborted: slices.Clone(x.aborted),
		HasProducer: func(pid int64) bool { return !x.expired[pid] }}
}

// forget drops what a pass reported from the aborted list, as the
// partition does, and reports whether every log's pass reported the same.
func (x *txnLog) forget(results []CompactResult) {
	x.t.Helper()
	for i, r := range results[1:] {
		if !slices.Equal(r.ForgetAborted, results[0].ForgetAborted) {
			x.t.Fatalf("log %d's pass reports %v to forget, log 0's %v", i+1, r.ForgetAborted, results[0].ForgetAborted)
		}
	}
	x.aborted = slices.DeleteFunc(x.aborted, func(a AbortedRange) bool { return slices.Contains(results[0].ForgetAborted, a) })
}

type kv struct{ key, value string }

// readCommitted reads the log below the last stable offset as Kafka's
// consumer does with read_committed, given the aborted transactions a
// fetch would hand it: offset -> record.
func readCommitted(t *testing.T, l *Log, aborted []AbortedRange, lso int64) map[int64]kv {
	t.Helper()
	queue := slices.Clone(aborted)
	sort.Slice(queue, func(i, j int) bool { return queue[i].FirstOffset < queue[j].FirstOffset })
	skipping := map[int64]bool{}
	out := map[int64]kv{}
	bs := logBatches(t, l)
	for _, base := range slices.Sorted(maps.Keys(bs)) {
		b := bs[base]
		h := mustHeader(t, b)
		if h.LastOffset() >= lso {
			break
		}
		if h.ProducerID >= 0 {
			for len(queue) > 0 && queue[0].FirstOffset <= h.LastOffset() {
				skipping[queue[0].ProducerID] = true
				queue = queue[1:]
			}
			if h.IsControl() {
				if controlType(b) == controlAbort {
					delete(skipping, h.ProducerID)
				}
				continue
			}
			if h.IsTransactional() && skipping[h.ProducerID] {
				continue
			}
		}
		recs, err := recordbatch.Records(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out[h.BaseOffset+int64(r.OffsetDelta)] = kv{string(r.Key), string(r.Value)}
		}
	}
	return out
}

func latestByKey(recs map[int64]kv) map[string]string {
	out := map[string]string{}
	for _, off := range slices.Sorted(maps.Keys(recs)) {
		out[recs[off].key] = recs[off].value
	}
	return out
}

// rawRecords is every record the log holds, aborted or not.
func rawRecords(t *testing.T, l *Log) map[int64]kv {
	out := map[int64]kv{}
	for _, r := range readAll(t, l, l.StartOffset()) {
		out[r.off] = kv{r.key, r.value}
	}
	return out
}

// TestCompactTransactionalData: on two logs with different segment
// layouts, a pass given the partition's transactions removes the records
// of the aborted transaction, compacts committed transactional records by
// key like others, stamps the COMMIT and ABORT markers of transactions
// left with no batch, drops the COMMIT marker only once
// delete.retention.ms has passed, reports the aborted transaction for
// forgetting then and drops its marker in the pass after the partition
// forgot it, keeps each producer's last data batch (emptied) until the
// producer expires, and everything from the open transaction on; offsets never change, batches keep their
// producer fields, read_committed reads the same latest values before and
// after, and both logs end with the same bytes.
func TestCompactTransactionalData(t *testing.T) {
	const deleteRetention = 10_000
	var logs []*Log
	for _, segBytes := range []int64{350, 1000} {
		logs = append(logs, openLog(t, t.TempDir(), Options{Compact: true, SegmentBytes: segBytes, IndexIntervalBytes: 64,
			RetentionMs: -1, DeleteRetentionMs: deleteRetention, Now: newClock(1_000_000).Now}))
	}
	x := &txnLog{t: t, logs: logs, ts: 1000, open: map[int64]int64{}, seq: map[int64]int32{}, expired: map[int64]bool{}}
	const p, idem, q = 100, 50, 300
	t1 := x.data(p, true, "a", "t1", "b", "t1")
	m1 := x.marker(p, true)
	t2 := x.data(p, true, "a", "aborted", "c", "aborted")
	t2b := x.data(p, true, "z", "aborted")
	m2 := x.marker(p, false)
	i1 := x.data(idem, false, "i", "idem")
	x.data(-1, false, "a", "plain", "i", "plain")
	t3 := x.data(p, true, "b", "t3", "d", "t3")
	m3 := x.marker(p, true)
	x.data(-1, false, "d", "plain")
	for i := range 12 {
		x.data(-1, false, fmt.Sprint("f", i%4), fmt.Sprint("filler", i))
	}
	// An open transaction: nothing from its first offset on is cleaned.
	open := x.data(q, true, "a", "open")
	e1 := x.data(-1, false, "e", "1")
	x.data(-1, false, "e", "2")
	for i := range 12 {
		x.data(-1, false, fmt.Sprint("g", i), "tail")
	}
	lso := x.lastStable()
	if lso != open {
		t.Fatalf("last stable %d, want the open transaction's first offset %d", lso, open)
	}

	rawBefore := rawRecords(t, logs[0])
	rcBefore := readCommitted(t, logs[0], x.aborted, lso)
	next := logs[0].NextOffset()
	now := int64(1_000_000)
	plan, ok := logs[0].PlanCompaction(now, lso)
	if !ok || plan.End > lso || plan.End <= m3 {
		t.Fatalf("plan %+v %v: want one ending at or below the last stable offset %d, above %d", plan, ok, lso, m3)
	}
	var check func(stage string)
	var forgot []AbortedRange
	apply := func(stage string, p CompactionPlan) map[int64][]byte {
		t.Helper()
		var results []CompactResult
		for _, l := range logs {
			r, err := l.CompactRange(p, x.txns())
			if err != nil {
				t.Fatalf("%s: %v", stage, err)
			}
			if l.NextOffset() != next {
				t.Fatalf("%s: next offset %d, was %d", stage, l.NextOffset(), next)
			}
			results = append(results, r)
		}
		bs := sameBatches(t, stage, logs...)
		// The fetch's view of a reader right after the pass: the list
		// before forgetting, with the log after the pass.
		check(stage)
		x.forget(results)
		forgot = results[0].ForgetAborted
		return bs
	}
	check = func(stage string) {
		t.Helper()
		for off, r := range rawRecords(t, logs[0]) {
			if rawBefore[off] != r {
				t.Fatalf("%s: record %v at %d, the log held %v there", stage, r, off, rawBefore[off])
			}
			if r.value == "aborted" {
				t.Fatalf("%s: aborted record %v left at %d", stage, r, off)
			}
		}
		rc := readCommitted(t, logs[0], x.aborted, lso)
		for off, r := range rc {
			if rcBefore[off] != r {
				t.Fatalf("%s: read_committed reads %v at %d, read %v before", stage, r, off, rcBefore[off])
			}
		}
		if got, want := latestByKey(rc), latestByKey(rcBefore); !maps.Equal(got, want) {
			t.Fatalf("%s: read_committed latest values %v, were %v", stage, got, want)
		}
	}
	header := func(bs map[int64][]byte, off int64) (recordbatch.Header, bool) {
		b, ok := bs[off]
		if !ok {
			return recordbatch.Header{}, false
		}
		return mustHeader(t, b), true
	}

	bs := apply("first pass", plan)
	check("first pass")
	for _, off := range []int64{t1, t2, t2b} {
		if _, ok := bs[off]; ok {
			t.Errorf("first pass: batch at %d (superseded or aborted, not its producer's last) kept", off)
		}
	}
	if h, ok := header(bs, m1); !ok || !h.HasDeleteHorizon() || h.FirstTimestamp != now+deleteRetention {
		t.Errorf("first pass: COMMIT marker of an emptied transaction: %+v %v, want it stamped with horizon %d", h, ok, now+deleteRetention)
	}
	if h, ok := header(bs, m2); !ok || !h.HasDeleteHorizon() || h.FirstTimestamp != now+deleteRetention {
		t.Errorf("first pass: ABORT marker of an emptied transaction: %+v %v, want it stamped with horizon %d", h, ok, now+deleteRetention)
	}
	if len(forgot) != 0 {
		t.Errorf("first pass: %v to forget before the horizon", forgot)
	}
	if h, ok := header(bs, m3); !ok || h.HasDeleteHorizon() {
		t.Errorf("first pass: COMMIT marker of a transaction with records left: %+v %v, want it kept as it was", h, ok)
	}
	// t3 lost d to a later record: rebuilt, with its producer fields.
	if h, ok := header(bs, t3); !ok || h.NumRecords != 1 || h.ProducerID != p || h.ProducerEpoch != 3 || h.BaseSequence != 5 ||
		!h.IsTransactional() || h.LastOffset() != t3+1 {
		t.Errorf("first pass: partly cleaned transactional batch %+v %v", h, ok)
	}
	// The idempotent producer's only batch lost its record: kept empty.
	if h, ok := header(bs, i1); !ok || h.NumRecords != 0 || h.ProducerID != idem || h.BaseSequence != 0 {
		t.Errorf("first pass: idempotent producer's last batch %+v %v, want it kept empty", h, ok)
	}
	if _, ok := rawRecords(t, logs[0])[e1]; !ok {
		t.Errorf("first pass: a superseded record above the last stable offset (%d) went", lso)
	}

	// Before the horizon nothing is due, and a pass then keeps the marker.
	if p2, ok := logs[0].PlanCompaction(now+deleteRetention-1, lso); ok {
		t.Errorf("a pass is due before the marker's horizon: %+v", p2)
	}
	early := plan
	early.NowMs = now + deleteRetention - 1
	bs = apply("before the horizon", early)
	check("before the horizon")
	if _, ok := header(bs, m1); !ok {
		t.Errorf("COMMIT marker dropped before its delete horizon")
	}
	if len(forgot) != 0 {
		t.Errorf("before the horizon: %v to forget", forgot)
	}

	late, ok := logs[0].PlanCompaction(now+deleteRetention, lso)
	if !ok {
		t.Fatal("no pass due at the marker's delete horizon")
	}
	bs = apply("at the horizon", late)
	check("at the horizon")
	if _, ok := header(bs, m1); ok {
		t.Errorf("COMMIT marker kept past its delete horizon")
	}
	for _, off := range []int64{m2, m3, t3, i1} {
		if _, ok := header(bs, off); !ok {
			t.Errorf("at the horizon: batch at %d went", off)
		}
	}
	// The ABORT marker stays while the partition still lists its
	// transaction; the pass reports it, and the next pass is due at once.
	if want := []AbortedRange{{ProducerID: p, FirstOffset: t2, LastOffset: m2}}; !slices.Equal(forgot, want) {
		t.Errorf("at the horizon: %v to forget, want %v", forgot, want)
	}
	after, ok := logs[0].PlanCompaction(now+deleteRetention, lso)
	if !ok {
		t.Fatal("no pass due once an aborted transaction was reported for forgetting")
	}
	bs = apply("after forgetting", after)
	check("after forgetting")
	if _, ok := header(bs, m2); ok {
		t.Errorf("ABORT marker of a forgotten transaction kept past its delete horizon")
	}
	if len(forgot) != 0 || len(x.aborted) != 0 {
		t.Errorf("after forgetting: %v to forget, %v listed", forgot, x.aborted)
	}
	for _, off := range []int64{m3, t3, i1} {
		if _, ok := header(bs, off); !ok {
			t.Errorf("after forgetting: batch at %d went", off)
		}
	}
	if p3, ok := logs[0].PlanCompaction(now+10*deleteRetention, lso); ok {
		t.Errorf("a pass is still due with nothing left to drop: %+v", p3)
	}

	// The idempotent producer expires: its emptied last batch goes.
	x.expired[idem] = true
	expired := after
	expired.NowMs = now + 10*deleteRetention
	bs = apply("producer expired", expired)
	check("producer expired")
	if _, ok := header(bs, i1); ok {
		t.Errorf("an expired producer's emptied last batch kept")
	}
	for _, off := range []int64{m3, t3} {
		if _, ok := header(bs, off); !ok {
			t.Errorf("producer expired: batch at %d went", off)
		}
	}
}

// TestCompactAbortMarkerOfExpiredProducer: while its producer is held, a
// transaction whose last batch is the producer's last data batch keeps
// that batch (emptied) and so its ABORT marker; once the producer expires
// the batch goes, and the marker goes through its three steps.
func TestCompactAbortMarkerOfExpiredProducer(t *testing.T) {
	const deleteRetention = 1000
	l := openLog(t, t.TempDir(), Options{Compact: true, SegmentBytes: 300, RetentionMs: -1,
		DeleteRetentionMs: deleteRetention, Now: newClock(1_000_000).Now})
	x := &txnLog{t: t, logs: []*Log{l}, ts: 1000, open: map[int64]int64{}, seq: map[int64]int32{}, expired: map[int64]bool{}}
	const p = 7
	t1 := x.data(p, true, "a", "aborted")
	x.data(p, true, "b", "aborted")
	m1 := x.marker(p, false)
	for i := range 20 {
		x.data(-1, false, fmt.Sprint("f", i), "filler")
	}
	now := int64(1_000_000)
	pass := func(stage string, at int64) (map[int64][]byte, []AbortedRange) {
		t.Helper()
		plan, ok := l.PlanCompaction(at, x.lastStable())
		if !ok {
			plan = CompactionPlan{End: l.mu.segs[len(l.mu.segs)-1].base, NowMs: at, DeleteRetentionMs: deleteRetention}
		}
		plan.NowMs = at
		r, err := l.CompactRange(plan, x.txns())
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		x.forget([]CompactResult{r})
		for off, rec := range rawRecords(t, l) {
			if rec.value == "aborted" {
				t.Fatalf("%s: aborted record at %d left", stage, off)
			}
		}
		return logBatches(t, l), r.ForgetAborted
	}
	bs, forgot := pass("first", now)
	// The last data batch is kept emptied (its producer's sequence), so its
	// transaction still has a batch: the marker is not stamped yet.
	if h := mustHeader(t, bs[m1]); h.HasDeleteHorizon() || len(forgot) != 0 {
		t.Fatalf("first pass: marker %+v, forgot %v: want it as it was", h, forgot)
	}
	if h, ok := bs[t1]; ok {
		t.Fatalf("first pass: aborted batch kept %v", mustHeader(t, h))
	}
	// The producer expires: its emptied batch goes, then the marker is
	// stamped, reported past its horizon, and dropped after.
	x.expired[p] = true
	bs, _ = pass("expired", now+1)
	if h := mustHeader(t, bs[m1]); !h.HasDeleteHorizon() {
		t.Fatalf("expired: marker %+v not stamped", h)
	}
	_, forgot = pass("past the horizon", now+1+deleteRetention)
	if len(forgot) != 1 || forgot[0].LastOffset != m1 {
		t.Fatalf("past the horizon: forgot %v, want the transaction ending at %d", forgot, m1)
	}
	bs, _ = pass("forgotten", now+2+deleteRetention)
	if _, ok := bs[m1]; ok {
		t.Fatal("ABORT marker of a forgotten transaction of an expired producer kept")
	}
}

// TestCompactUnknownTransactionsVerbatim: without the partition's
// transactions (Compact) transactional batches and markers stay as they
// are and supersede nothing.
func TestCompactUnknownTransactionsVerbatim(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{Compact: true, SegmentBytes: 300, RetentionMs: -1, Now: newClock(1_000_000).Now})
	x := &txnLog{t: t, logs: []*Log{l}, ts: 1000, open: map[int64]int64{}, seq: map[int64]int32{}}
	plain := x.data(-1, false, "a", "plain")
	t1 := x.data(100, true, "a", "txn")
	m1 := x.marker(100, false)
	for i := range 20 {
		x.data(-1, false, fmt.Sprint("f", i), "filler")
	}
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	bs := logBatches(t, l)
	for _, off := range []int64{plain, t1, m1} {
		if _, ok := bs[off]; !ok {
			t.Errorf("batch at %d went without the partition's transactions known", off)
		}
	}
}
