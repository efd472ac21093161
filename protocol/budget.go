package protocol

import (
	"sync"
	"sync/atomic"
)

// Budget is a count of bytes that the broker may hold for one purpose
// (partially read requests, queued responses, fetch reads), shared by every
// goroutine that holds such bytes. Holders acquire before they allocate and
// release once the bytes are gone. A nil *Budget is unbounded and counts
// nothing, so code paths without a configured budget need no checks.
//
// Invariant: used >= 0 whenever every holder has released what it acquired;
// used may pass capacity only through Force, by what its callers document.
type Budget struct {
	name     string
	capacity int64
	used     atomic.Int64

	// waiting says some goroutine waits in Changed, so Release must signal;
	// it keeps the mutex off the release path when nobody waits.
	waiting atomic.Bool
	mu      sync.Mutex    // guards changed
	changed chan struct{} // closed at the next release; nil: none made
}

// NewBudget makes a budget of capacity bytes (<= 0: unbounded, which is a
// nil budget).
func NewBudget(name string, capacity int64) *Budget {
	if capacity <= 0 {
		return nil
	}
	return &Budget{name: name, capacity: capacity}
}

// Name is the budget's name, as metrics label it.
func (b *Budget) Name() string {
	if b == nil {
		return ""
	}
	return b.name
}

// Capacity is the budget's size in bytes (0: unbounded).
func (b *Budget) Capacity() int64 {
	if b == nil {
		return 0
	}
	return b.capacity
}

// Used is the bytes held now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Available is the bytes that may still be acquired (at most 0 when the
// budget is spent; a large number when unbounded).
func (b *Budget) Available() int64 {
	if b == nil {
		return 1 << 62
	}
	return b.capacity - b.used.Load()
}

// TryAcquire takes n bytes if all of them are free and reports whether it
// did.
func (b *Budget) TryAcquire(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	for {
		u := b.used.Load()
		if u+n > b.capacity {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// AcquireUpTo takes what is free of n bytes, possibly 0, and returns it.
func (b *Budget) AcquireUpTo(n int64) int64 {
	if b == nil || n <= 0 {
		return max(n, 0)
	}
	for {
		u := b.used.Load()
		got := min(n, b.capacity-u)
		if got <= 0 {
			return 0
		}
		if b.used.CompareAndSwap(u, u+got) {
			return got
		}
	}
}

// Force takes n bytes whether or not they are free: for bytes that already
// exist (a response handed over) or that must be allowed for progress.
// Callers say how far past the capacity it can take the budget.
func (b *Budget) Force(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.used.Add(n)
}

// Release gives back n bytes acquired before, waking Changed's waiters.
func (b *Budget) Release(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.used.Add(-n)
	if b.waiting.Load() {
		b.mu.Lock()
		if b.changed != nil {
			close(b.changed)
			b.changed = nil
		}
		b.waiting.Store(false)
		b.mu.Unlock()
	}
}

// Changed returns a channel closed at the next Release (nil for an unbounded
// budget: it never changes). Waiters check the budget again after it fires.
func (b *Budget) Changed() <-chan struct{} {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	b.waiting.Store(true)
	return b.changed
}
