package partition

import (
	"log/slog"
	"testing"
	"time"

	"github.com/regent-broker/regent/interop/testwait"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// TestLeaderEpochIsTheTerm: in a cluster, what a partition appends is
// stamped with the raft term of the entry that committed it, and every
// node's epoch cache starts each term at the first offset written in it,
// so OffsetForLeaderEpoch answers alike wherever it is asked. A reopened
// log keeps its epochs.
func TestLeaderEpochIsTheTerm(t *testing.T) {
	c := newFakeCluster(t, 2)
	sys := quietSystem(t)
	dir := t.TempDir()
	leader, err := Open(sys.Root, Options{Dir: dir, Topic: "orders", Config: defaultConfig(t), Repl: c.nodes[0], Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	follower := openWith(t, sys, c.nodes[1])
	setTerm := func(term uint64) {
		c.mu.Lock()
		c.term = term
		c.mu.Unlock()
	}

	setTerm(3)
	if res := produceSync(t, leader, batch(t, -1, -1, -1, 2, false)); res.Err != nil || res.BaseOffset != 0 {
		t.Fatalf("produce in term 3: %+v", res)
	}
	setTerm(5)
	if res := produceSync(t, leader, txnBatch(t, 7, 0, 0, 2)); res.Err != nil || res.BaseOffset != 2 {
		t.Fatalf("produce in term 5: %+v", res)
	}
	setTerm(6)
	if err := markerSync(t, leader, 7, 0, true); err != nil {
		t.Fatalf("marker in term 6: %v", err)
	}

	want := []int32{3, 5, 6} // the epoch of each batch, in order
	for name, p := range map[string]*Partition{"leader": leader, "follower": follower} {
		testwait.For(t, name+" applies every entry", 10*time.Second, func() bool { return p.HighWatermark() == 5 })
		b, err := p.Read(0, 1<<20, false)
		if err != nil {
			t.Fatal(err)
		}
		var got []int32
		for len(b) >= recordbatch.HeaderSize {
			h, err := recordbatch.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, h.PartitionLeaderEpoch)
			b = b[h.TotalSize():]
		}
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Fatalf("%s: batch epochs %v, want %v", name, got, want)
		}
		lg := p.Log()
		for _, tc := range []struct {
			ask, epoch int32
			end        int64
		}{
			{0, 0, 0}, // the epoch the log was opened at, before any term
			{3, 3, 2}, {4, 3, 2}, {5, 5, 4}, {6, 6, 5}, {7, -1, -1},
		} {
			if e, end := lg.EndOffsetForEpoch(tc.ask); e != tc.epoch || end != tc.end {
				t.Errorf("%s: end offset for epoch %d = (%d, %d), want (%d, %d)", name, tc.ask, e, end, tc.epoch, tc.end)
			}
		}
		for off, e := range map[int64]int32{0: 3, 1: 3, 2: 5, 4: 6, 5: 6} {
			if got := lg.EpochAt(off); got != e {
				t.Errorf("%s: epoch at %d = %d, want %d", name, off, got, e)
			}
		}
	}

	// A term with no write leaves the cache alone; reopening keeps it.
	setTerm(9)
	if err := leader.Close(false); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(sys.Root, Options{Dir: dir, Topic: "orders", Config: defaultConfig(t), Repl: c.nodes[0], Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reopened.Close(false) })
	if e := reopened.Log().LatestEpoch(); e != 6 {
		t.Fatalf("reopened log's latest epoch %d, want 6", e)
	}
	if e, end := reopened.Log().EndOffsetForEpoch(3); e != 3 || end != 2 {
		t.Fatalf("reopened: end offset for epoch 3 = (%d, %d), want (3, 2)", e, end)
	}
}
