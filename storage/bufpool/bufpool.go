// Package bufpool recycles large byte buffers by power-of-two size class.
// The broker's largest allocations are the bytes of produced records: a
// produce request's frame, and in cluster mode each node's copy of the
// records it applies. Recycling them spares the allocation, its zeroing
// and the garbage collections that rate of allocation drives. A buffer
// goes back only where its one user knows nothing reads it any more;
// anything else is simply left to the garbage collector.
package bufpool

import (
	"math/bits"
	"sync"
)

const (
	minShift = 14 // 16 KiB: smaller buffers are cheap to allocate
	maxShift = 24 // 16 MiB: larger ones are rare
	// Each octave above 16 KiB has four classes (1.25, 1.5, 1.75 and 2
	// times its base), so a buffer is less than 25% larger than the size
	// asked for: its user's accounting (netio charges a frame's size to
	// the request budget) undercounts it by less than a quarter, where
	// power-of-two classes would have allowed twice.
	perOctave = 4
)

// Pool holds idle buffers by class; sync.Pool lets the collector take back
// what stays idle. The zero Pool is ready; safe from any goroutine.
type Pool struct {
	classes [1 + perOctave*(maxShift-minShift)]sync.Pool
}

// Class is the class whose buffers hold size bytes; -1: size is not pooled.
func Class(size int) int {
	c, _ := class(size)
	return c
}

// ClassSize is the capacity of the buffers Get returns for size (0: size
// is not pooled).
func ClassSize(size int) int {
	_, n := class(size)
	return n
}

// class is size's class and that class's buffer size.
func class(size int) (int, int) {
	switch {
	case size < 1<<minShift || size > 1<<maxShift:
		return -1, 0
	case size == 1<<minShift:
		return 0, size
	}
	k := bits.Len(uint(size-1)) - 1 // 2^k < size <= 2^(k+1)
	step := 1 << (k - 2)
	q := (size + step - 1) / step // 5..8 quarters of 2^k
	return 1 + perOctave*(k-minShift) + q - 5, q * step
}

// Get is a buffer of len and cap ClassSize(size) >= size, nil when size is
// not pooled. Its contents are whatever its last user left.
func (p *Pool) Get(size int) *[]byte {
	c, n := class(size)
	if c < 0 {
		return nil
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, n)
	return &b
}

// Put gives back a buffer Get returned (others are ignored); nothing may
// read or write it afterwards.
func (p *Pool) Put(b *[]byte) {
	if b == nil {
		return
	}
	n := cap(*b)
	if c, size := class(n); c >= 0 && size == n {
		*b = (*b)[:n]
		p.classes[c].Put(b)
	}
}
