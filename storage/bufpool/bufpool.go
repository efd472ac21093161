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
)

// Pool holds idle buffers by class; sync.Pool lets the collector take back
// what stays idle. The zero Pool is ready; safe from any goroutine.
type Pool struct {
	classes [maxShift - minShift + 1]sync.Pool
}

// Class is the class whose buffers hold size bytes; -1: size is not pooled.
func Class(size int) int {
	if size < 1<<minShift || size > 1<<maxShift {
		return -1
	}
	return bits.Len(uint(size-1)) - minShift
}

// Get is a buffer of len and cap 1<<(Class(size)+14) >= size, nil when
// size is not pooled. Its contents are whatever its last user left.
func (p *Pool) Get(size int) *[]byte {
	c := Class(size)
	if c < 0 {
		return nil
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 1<<(c+minShift))
	return &b
}

// Put gives back a buffer Get returned (others are ignored); nothing may
// read or write it afterwards.
func (p *Pool) Put(b *[]byte) {
	if b == nil {
		return
	}
	n := cap(*b)
	if c := Class(n); c >= 0 && n == 1<<(c+minShift) {
		*b = (*b)[:n]
		p.classes[c].Put(b)
	}
}
