package replication

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// BenchmarkLocalPropose is the single-node replicator's own cost per
// proposal: apply on the proposer's goroutine, answer on the callback
// goroutine (typed). "inline" is what answering on the proposer's goroutine
// cost (the old behaviour), for comparison.
func BenchmarkLocalPropose(b *testing.B) {
	b.Run("async", func(b *testing.B) {
		l := NewLocal()
		l.Register("k", &counter{})
		var answered atomic.Int64
		done := func(int, error) { answered.Add(1) }
		b.ReportAllocs()
		for b.Loop() {
			Propose(l, "k", 1, done)
		}
		// The callback goroutine drains what is queued (b.N answers).
		for answered.Load() != int64(b.N) {
			runtime.Gosched()
		}
	})
	b.Run("inline", func(b *testing.B) {
		c := &counter{}
		var answered atomic.Int64
		done := func(int, error) { answered.Add(1) }
		b.ReportAllocs()
		for b.Loop() {
			done(As[int](c.Apply(1), nil))
		}
	})
}
