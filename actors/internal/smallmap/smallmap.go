// Package smallmap is a map for the many small maps the group coordinator
// keeps per group. Go's map allocates a group of eight slots at its first
// entry, so a group with one committed offset paid ~930 bytes for it, and
// its store index as much again: 100,000 groups of one offset each held
// 437 MB of heap. A Map keeps up to eight entries in a slice, where a
// linear search costs no more than hashing, and moves them to a Go map
// when a ninth comes.
package smallmap

import "iter"

// maxSmall is the most entries kept in the slice.
const maxSmall = 8

type entry[K comparable, V any] struct {
	k K
	v V
}

// Map is a map from K to V. The zero Map is empty and ready to use. Not
// safe for concurrent use; entries must not be set or deleted while All
// or Keys is being ranged over.
type Map[K comparable, V any] struct {
	small []entry[K, V]
	big   map[K]V // non-nil once the entries outgrew small
}

// Len is the number of entries.
func (m *Map[K, V]) Len() int {
	if m.big != nil {
		return len(m.big)
	}
	return len(m.small)
}

// Get returns k's value and whether k is present.
func (m *Map[K, V]) Get(k K) (V, bool) {
	if m.big != nil {
		v, ok := m.big[k]
		return v, ok
	}
	for i := range m.small {
		if m.small[i].k == k {
			return m.small[i].v, true
		}
	}
	var zero V
	return zero, false
}

// Has reports whether k is present.
func (m *Map[K, V]) Has(k K) bool {
	_, ok := m.Get(k)
	return ok
}

// Set sets k's value.
func (m *Map[K, V]) Set(k K, v V) {
	if m.big != nil {
		m.big[k] = v
		return
	}
	for i := range m.small {
		if m.small[i].k == k {
			m.small[i].v = v
			return
		}
	}
	if len(m.small) < maxSmall {
		m.small = append(m.small, entry[K, V]{k, v})
		return
	}
	m.big = make(map[K]V, 2*maxSmall)
	for _, e := range m.small {
		m.big[e.k] = e.v
	}
	m.big[k] = v
	m.small = nil
}

// Delete removes k, if present.
func (m *Map[K, V]) Delete(k K) {
	if m.big != nil {
		delete(m.big, k)
		return
	}
	for i := range m.small {
		if m.small[i].k == k {
			last := len(m.small) - 1
			m.small[i] = m.small[last]
			var zero entry[K, V]
			m.small[last] = zero // drop references
			m.small = m.small[:last]
			if last == 0 {
				m.small = nil
			}
			return
		}
	}
}

// Clear removes every entry.
func (m *Map[K, V]) Clear() {
	m.small, m.big = nil, nil
}

// All yields every entry, in no particular order.
func (m *Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if m.big != nil {
			for k, v := range m.big {
				if !yield(k, v) {
					return
				}
			}
			return
		}
		for _, e := range m.small {
			if !yield(e.k, e.v) {
				return
			}
		}
	}
}

// Keys yields every key, in no particular order.
func (m *Map[K, V]) Keys() iter.Seq[K] {
	return func(yield func(K) bool) {
		for k := range m.All() {
			if !yield(k) {
				return
			}
		}
	}
}
