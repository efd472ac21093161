package protocol

import "sync/atomic"

// fanIn returns a func to be called once per part of a request answered by
// several actors; after the n-th call it calls done (at once when n is 0).
// Each part writes only its own slot of the response, so the parts need no
// lock between them; the atomic countdown orders those writes before done.
func fanIn(n int, done func()) func() {
	if n == 0 {
		done()
		return func() {}
	}
	var left atomic.Int64
	left.Store(int64(n))
	return func() {
		if left.Add(-1) == 0 {
			done()
		}
	}
}
