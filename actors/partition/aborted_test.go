package partition

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAbortedIndexMatchesScan: over random interleavings of transactions
// (long ones spanning many short ones, commits and aborts, plain batches)
// and log-start moves, the index answers every fetch range exactly as a
// scan of the whole list would, and a snapshot-restored index (bounds
// recomputed) answers the same.
func TestAbortedIndexMatchesScan(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for round := range 8 {
		lg := &memLog{}
		sl, err := openStateLog(lg, defaultConfig(t), 0, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		seqs := map[int64]int32{}
		open := map[int64]bool{}
		for range 300 {
			pid := int64(r.IntN(12))
			switch k := r.IntN(10); {
			case k < 5:
				if res := sl.produce(txnBatch(t, pid, 0, seqs[pid], 1), 1000); res.Err != nil {
					t.Fatalf("round %d: produce: %v", round, res.Err)
				}
				seqs[pid]++
				open[pid] = true
			case k < 8 && open[pid]:
				if m := sl.writeMarker(pid, 0, r.IntN(3) == 0, 0, 1000); m.Err != nil {
					t.Fatalf("round %d: marker: %v", round, m.Err)
				}
				open[pid] = false
			case k == 8:
				sl.produce(batch(t, -1, -1, -1, 1, false), 1000)
			default:
				st := sl.st
				if off := st.StartOffset() + int64(r.IntN(3)); off <= st.LastStable() && r.IntN(4) == 0 {
					sl.deleteRecords(off)
				}
			}
		}
		st := sl.st
		restored := NewState(defaultConfig(t), 0, st.StartOffset(), st.NextOffset())
		if _, ok := restored.restoreSnapshot(st.encodeSnapshot()); !ok {
			t.Fatal("snapshot refused")
		}
		all := st.Aborted()
		for i := range all {
			if all[i].LastOffset < st.StartOffset() {
				t.Fatalf("round %d: %+v kept below the log start %d", round, all[i], st.StartOffset())
			}
		}
		lso := st.LastStable()
		for _, v := range []*ReadView{st.View(), restored.View()} {
			for from := st.StartOffset(); from <= lso; from++ {
				for to := from; to <= lso; to++ {
					var want []AbortedTxn
					for _, a := range all {
						if a.LastOffset >= from && a.FirstOffset < to {
							want = append(want, a)
						}
					}
					if got := v.AbortedIn(from, to); !slices.Equal(got, want) {
						t.Fatalf("round %d: [%d, %d): got %+v, want %+v", round, from, to, got, want)
					}
				}
			}
		}
	}
}
