package partition

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// compactActor is maintainActor for a cleanup.policy=compact topic.
func compactActor(t *testing.T, segmentBytes int64, repl cluster.Replicator) *partitionActor {
	t.Helper()
	cfg := defaultConfig(t)
	cfg.CleanupCompact, cfg.CleanupDelete = true, false
	cfg.SegmentBytes, cfg.DeleteRetentionMs = segmentBytes, 0
	lg, err := storage.Open(t.TempDir(), StorageOptions(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lg.Close() })
	st, err := openStateLog(lg, cfg, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &Partition{Topic: "t", log: lg}
	p.waiters.set = map[*Waiter]struct{}{}
	p.view.Store(st.st.View()) // as the partition's open does
	return &partitionActor{p: p, sl: st, repl: repl, key: "partition/t/0", logger: slog.New(slog.DiscardHandler)}
}

// produceKeyed produces the same keyed record sets (many updates of eight
// keys, some tombstones, some two-record batches) to every actor's state,
// at the same command time, as every node applies the same appends.
func produceKeyed(t *testing.T, round, n int, actors ...*partitionActor) {
	t.Helper()
	now := time.Now().UnixMilli()
	for i := range n {
		recs := []recordbatch.Record{{Key: []byte(fmt.Sprint("k", i%8)), Value: []byte(fmt.Sprint("v", round, "-", i))}}
		if i%4 == 1 {
			recs[0].Value, recs[0].ValueNull = nil, true
		}
		if i%5 == 2 {
			recs = append(recs, recordbatch.Record{OffsetDelta: 1, Key: []byte(fmt.Sprint("j", i%3)), Value: []byte("w")})
		}
		b, err := recordbatch.Build(recordbatch.Header{FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range actors {
			if res := a.sl.produce(slices.Clone(b), now); res.Err != nil {
				t.Fatalf("produce %d: %v", i, res.Err)
			}
		}
	}
}

// batchesOf maps each batch's base offset to its bytes.
func batchesOf(t *testing.T, lg *storage.Log) map[int64][]byte {
	t.Helper()
	out := map[int64][]byte{}
	for off := lg.StartOffset(); off < lg.NextOffset(); {
		data, err := lg.Read(off, 1<<20, false)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		bs, err := recordbatch.Split(data)
		if err != nil || len(bs) == 0 {
			t.Fatalf("read %d: %d batches, %v", off, len(bs), err)
		}
		for _, b := range bs {
			h, _ := recordbatch.ParseHeader(b)
			out[h.BaseOffset] = slices.Clone(b)
			off = h.LastOffset() + 1
		}
	}
	return out
}

// TestCompactionIsProposedNotApplied: a leader whose log is due proposes
// one compaction pass in offsets with its clock and cleans nothing until
// it is applied; a node that does not lead proposes nothing.
func TestCompactionIsProposedNotApplied(t *testing.T) {
	repl := &recordingRepl{}
	a := compactActor(t, 700, repl)
	produceKeyed(t, 0, 150, a)
	before, size := batchesOf(t, a.p.log), a.p.log.Size()
	want, ok := a.planCompaction(time.Now().UnixMilli())
	if !ok || want.End <= 0 {
		t.Fatalf("test log is not due for compaction: %+v %v", want, ok)
	}

	a.maintain(false)
	if got := repl.commands(); len(got) != 0 {
		t.Fatalf("a node that does not lead proposed %v", got)
	}
	start := time.Now()
	a.maintain(true)
	if got := batchesOf(t, a.p.log); a.p.log.Size() != size || len(got) != len(before) {
		t.Fatalf("compaction applied locally: %d bytes in %d batches, had %d in %d", a.p.log.Size(), len(got), size, len(before))
	}
	got := repl.commands()
	if len(got) != 1 {
		t.Fatalf("proposed %d commands, want 1: %v", len(got), got)
	}
	cmd, ok := got[0].(*compactCmd)
	if !ok || cmd.CommandKind() != kindCompact || cmd.dirtyStart != want.DirtyStart || cmd.end != want.End ||
		cmd.deleteRetentionMs != 0 || cmd.now < start.UnixNano() || cmd.now > time.Now().UnixNano() {
		t.Fatalf("proposed %#v, want the pass %+v at the leader's clock", got[0], want)
	}
	// Its answer has not come: the next pass does not propose it again.
	a.maintain(true)
	if n := len(repl.commands()); n != 1 {
		t.Fatalf("%d proposals with one in flight", n)
	}
}

// TestCompactionAppliedAlikeOnEveryNode: two nodes holding the same records
// in different segments apply the leader's compaction commands (after the
// trip through the raft log's encoding) and keep the same batches, byte
// for byte, at the same offsets; the second round's leader is the other
// node, and its pass drops the tombstones whose horizon passed.
func TestCompactionAppliedAlikeOnEveryNode(t *testing.T) {
	ra, rb := &recordingRepl{}, &recordingRepl{}
	a, b := compactActor(t, 700, ra), compactActor(t, 1900, rb)
	produceKeyed(t, 0, 150, a, b)
	if segmentCount(t, a.p.log.Dir()) == segmentCount(t, b.p.log.Dir()) {
		t.Fatal("test needs different segment layouts")
	}
	size := a.p.log.Size()
	var firstEnd int64
	straddled := false // a plan's end fell inside a segment of a node
	for round, leader := range []*partitionActor{a, b} {
		repl := leader.repl.(*recordingRepl)
		leader.maintain(true)
		cmds := repl.commands()
		if len(cmds) != 1 {
			t.Fatalf("round %d: %d proposals", round, len(cmds))
		}
		enc := cmds[0].(*compactCmd)
		dec, err := decodeCompact(enc.AppendCommand(nil))
		if err != nil {
			t.Fatal(err)
		}
		if *dec.(*compactCmd) != *enc {
			t.Fatalf("round trip %#v -> %#v", enc, dec)
		}
		if round == 0 {
			firstEnd = enc.end
		}
		for _, n := range []*partitionActor{a, b} {
			straddled = straddled || !slices.Contains(segmentBases(t, n.p.log.Dir()), enc.end)
		}
		for _, n := range []*partitionActor{a, b} {
			if res, ok := n.Apply(dec).(compactResult); !ok || res.err != nil {
				t.Fatalf("round %d: apply: %#v", round, res)
			}
		}
		ba, bb := batchesOf(t, a.p.log), batchesOf(t, b.p.log)
		if len(ba) != len(bb) {
			t.Fatalf("round %d: %d batches on one node, %d on the other", round, len(ba), len(bb))
		}
		for off, x := range ba {
			if !bytes.Equal(x, bb[off]) {
				t.Fatalf("round %d: the batch at %d differs between the nodes", round, off)
			}
		}
		if a.p.log.NextOffset() != b.p.log.NextOffset() || a.p.log.StartOffset() != b.p.log.StartOffset() {
			t.Fatalf("round %d: offsets differ", round)
		}
		produceKeyed(t, round+1, 100, a, b)
	}
	if !straddled {
		t.Fatal("no plan ended inside a segment: the layouts do not test the offset-based cleaning")
	}
	for off, x := range batchesOf(t, b.p.log) {
		recs, err := recordbatch.Records(x)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.ValueNull && off+int64(r.OffsetDelta) < firstEnd {
				t.Fatalf("tombstone at %d, below the first pass's end %d, outlived its horizon", off+int64(r.OffsetDelta), firstEnd)
			}
		}
	}
	if a.p.log.Size() >= size+size/2 {
		t.Fatalf("compaction kept the log at %d bytes (was %d before 200 more batches)", a.p.log.Size(), size)
	}
}

// TestCompactionLocalAppliesAtOnce: a single node (cluster.Local) cleans in
// the same maintenance pass, as before compaction went through the log.
func TestCompactionLocalAppliesAtOnce(t *testing.T) {
	local := cluster.NewLocal()
	a := compactActor(t, 700, local)
	local.Register(a.key, a)
	produceKeyed(t, 0, 150, a)
	size := a.p.log.Size()
	a.maintain(true)
	if a.p.log.Size() >= size {
		t.Fatalf("log still %d bytes (was %d)", a.p.log.Size(), size)
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.compacting.Load() {
		if time.Now().After(deadline) {
			t.Fatal("compaction proposal never answered")
		}
		time.Sleep(time.Millisecond)
	}
}

// segmentBases lists the base offsets of the segments in dir.
func segmentBases(t *testing.T, dir string) []int64 {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, f := range m {
		n, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(f), ".log"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}
