package partition

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAbortedIndexMatchesScan: over random interleavings of transactions
// (long ones spanning many short ones, commits and aborts, plain batches)
// log-start moves and forgetting (compaction's ForgetAborted), the index
// answers every fetch range exactly as a scan of the whole list would, a
// view taken before a forget keeps its list, and a snapshot-restored index (bounds
// recomputed) answers the same.
func TestAbortedIndexMatchesScan(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for round := range 8 {
		// Long rounds fill blocks of 16 and 256 entries; short ones are
		// checked on every range.
		ops, long := 300, round%2 == 1
		if long {
			ops = 6000
		}
		lg := &memLog{}
		sl, err := openStateLog(lg, defaultConfig(t), 0, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		seqs := map[int64]int32{}
		open := map[int64]bool{}
		for range ops {
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
				if ab := st.Aborted(); len(ab) > 0 && r.IntN(3) == 0 {
					var drop []AbortedTxn
					for _, a := range ab {
						// Long rounds must keep hundreds listed.
						if (!long && r.IntN(4) == 0) || r.IntN(2000) == 0 {
							drop = append(drop, a)
						}
					}
					v := st.View()
					held := slices.Clone(v.aborted.txns)
					if n := st.ForgetAborted(drop); n != len(drop) {
						t.Fatalf("round %d: forgot %d of %d", round, n, len(drop))
					}
					if !slices.Equal(v.aborted.txns, held) {
						t.Fatalf("round %d: forgetting changed a view's list", round)
					}
					for _, a := range drop {
						if slices.Contains(st.Aborted(), a) {
							t.Fatalf("round %d: %+v still listed", round, a)
						}
					}
				} else if off := st.StartOffset() + int64(r.IntN(3)); off <= st.LastStable() && r.IntN(4) == 0 {
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
		check := func(v *ReadView, from, to int64) {
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
		if long && len(all) < 300 {
			t.Fatalf("round %d: only %d aborted transactions", round, len(all))
		}
		for _, v := range []*ReadView{st.View(), restored.View()} {
			if long {
				for range 5000 {
					from := st.StartOffset() + r.Int64N(lso-st.StartOffset()+1)
					check(v, from, from+r.Int64N(lso-from+1))
				}
				continue
			}
			for from := st.StartOffset(); from <= lso; from++ {
				for to := from; to <= lso; to++ {
					check(v, from, to)
				}
			}
		}
	}
}

// BenchmarkAbortedInUnderLongTransaction: 100,000 short aborted
// transactions while one long transaction stays open from offset 0 (so
// every bound is 0 and the bound alone cannot end the range), then the
// long one aborts. A fetch of an early range has two answers; the block
// minimums skip the rest (a scan to the bound's stop reads all 100,000).
func BenchmarkAbortedInUnderLongTransaction(b *testing.B) {
	var x abortedIndex
	const n = 100_000
	for i := range int64(n) {
		x.add(AbortedTxn{ProducerID: 2, FirstOffset: 10 + 2*i, LastOffset: 11 + 2*i}, 0)
	}
	x.add(AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 10 + 2*n}, 11+2*n)
	v := x.clip()
	if got := v.in(0, 12); len(got) != 2 {
		b.Fatalf("%d answers, want 2", len(got))
	}
	b.ReportAllocs()
	for b.Loop() {
		v.in(0, 12)
	}
}
