package partition

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestProducerTableMatchesMap: random adds and deletes (runs of
// consecutive ids and scattered ones) keep the table equal to a map, its
// slab counting live entries; chunks emptied are given back, the free
// list stays bounded by what the live chunks hold, and an emptied table
// holds nothing.
func TestProducerTableMatchesMap(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	var tb producerTable
	model := map[int64]int16{}
	next := int64(0)
	check := func(step int) {
		if tb.len() != len(model) {
			t.Fatalf("step %d: len %d, model %d", step, tb.len(), len(model))
		}
		seen := 0
		tb.each(func(e *producerEntry) {
			seen++
			if ep, ok := model[e.pid]; !ok || ep != e.epoch || tb.slab.at(e.self) != e {
				t.Fatalf("step %d: entry %+v not in the model (%d, %v)", step, e.pid, ep, ok)
			}
		})
		if seen != len(model) {
			t.Fatalf("step %d: each saw %d, model %d", step, seen, len(model))
		}
		chunks := 0
		for _, c := range tb.slab.chunks {
			if c != nil {
				chunks++
			}
		}
		if len(tb.slab.free) > 2*len(tb.slab.chunks)*slabChunk+1 {
			t.Fatalf("step %d: free list %d with %d chunk slots", step, len(tb.slab.free), len(tb.slab.chunks)*slabChunk)
		}
		if chunks*slabChunk < len(model) {
			t.Fatalf("step %d: %d chunks for %d entries", step, chunks, len(model))
		}
	}
	for step := range 200 {
		switch r.IntN(3) {
		case 0: // a run of new producers
			for range r.IntN(3000) {
				if tb.get(next) != nil {
					t.Fatalf("step %d: %d present before add", step, next)
				}
				e := tb.add(next)
				e.epoch = int16(next % 7)
				model[next] = e.epoch
				next++
			}
		case 1: // scattered ids
			for range r.IntN(200) {
				pid := r.Int64N(1 << 40)
				if _, ok := model[pid]; ok {
					continue
				}
				tb.add(pid).epoch = 3
				model[pid] = 3
			}
		default: // the oldest run expires, and a few others
			for pid := range model {
				if pid < next-int64(r.IntN(4000)) || r.IntN(50) == 0 {
					tb.del(pid)
					delete(model, pid)
				}
			}
			tb.shrink()
		}
		for pid, ep := range model {
			if e := tb.get(pid); e == nil || e.epoch != ep || e.pid != pid {
				t.Fatalf("step %d: get(%d) = %+v, want epoch %d", step, pid, e, ep)
			}
			break
		}
		check(step)
	}
	for pid := range model {
		tb.del(pid)
	}
	if tb.len() != 0 || len(tb.slab.chunks) != 0 || len(tb.slab.free) != 0 || len(tb.pages) != 0 {
		t.Fatalf("emptied table holds %d entries, %d chunks, %d free, %d pages", tb.len(), len(tb.slab.chunks), len(tb.slab.free), len(tb.pages))
	}
}

// TestFewProducersHoldLittle: a partition with a few producers holds one
// block of entries, not a whole chunk (~180 KB each, which 24 partitions
// of 4 idempotent producers paid before).
func TestFewProducersHoldLittle(t *testing.T) {
	const tables = 100
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tbs := make([]producerTable, tables)
	for i := range tbs {
		for pid := range int64(4) {
			tbs[i].add(1000 + pid)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / tables
	t.Logf("%d B per table of 4 producers", per)
	if per > 16<<10 {
		t.Fatalf("a table of 4 producers holds %d B", per)
	}
	runtime.KeepAlive(tbs)
}
