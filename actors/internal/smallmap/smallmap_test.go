package smallmap

import (
	"math/rand/v2"
	"testing"
)

// TestMatchesGoMap drives a Map and a Go map with the same random sets and
// deletes, over few and many keys, and compares them after every step.
func TestMatchesGoMap(t *testing.T) {
	for _, keys := range []int{3, 8, 9, 40} {
		rng := rand.New(rand.NewPCG(uint64(keys), 7))
		var m Map[int, string]
		ref := map[int]string{}
		for step := range 4000 {
			k := rng.IntN(keys)
			if rng.IntN(3) == 0 {
				m.Delete(k)
				delete(ref, k)
			} else {
				v := string(rune('a' + step%26))
				m.Set(k, v)
				ref[k] = v
			}
			if m.Len() != len(ref) {
				t.Fatalf("keys %d step %d: len %d, want %d", keys, step, m.Len(), len(ref))
			}
			for k := range keys {
				got, ok := m.Get(k)
				want, wok := ref[k]
				if ok != wok || got != want || m.Has(k) != wok {
					t.Fatalf("keys %d step %d: Get(%d) = %q %v, want %q %v", keys, step, k, got, ok, want, wok)
				}
			}
			seen := map[int]bool{}
			for k, v := range m.All() {
				if seen[k] || ref[k] != v {
					t.Fatalf("keys %d step %d: All yielded %d=%q (seen %v, want %q)", keys, step, k, v, seen[k], ref[k])
				}
				seen[k] = true
			}
			if len(seen) != len(ref) {
				t.Fatalf("keys %d step %d: All yielded %d entries, want %d", keys, step, len(seen), len(ref))
			}
		}
		n := 0
		for range m.Keys() {
			n++
		}
		if n != len(ref) {
			t.Fatalf("keys %d: Keys yielded %d, want %d", keys, n, len(ref))
		}
		m.Clear()
		if m.Len() != 0 || m.Has(0) {
			t.Fatalf("keys %d: not empty after Clear", keys)
		}
	}
}

// TestOneEntryIsSmall: a map of one entry allocates one entry, not a Go
// map's group of eight slots.
func TestOneEntryIsSmall(t *testing.T) {
	type offset struct {
		a, b int64
		s    string
		c, d [3]int64
	}
	allocs := testing.AllocsPerRun(100, func() {
		var m Map[string, offset]
		m.Set("k", offset{a: 1})
		if !m.Has("k") {
			t.Fatal("lost the entry")
		}
	})
	if allocs > 1 {
		t.Fatalf("%v allocations for one entry, want 1", allocs)
	}
}
