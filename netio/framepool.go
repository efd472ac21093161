package netio

import (
	"math/bits"
	"sync"
)

// Produce frames are the broker's largest allocations by far: every
// produced byte arrives in one. Their buffers are recycled, sparing the
// allocation, its zeroing and the garbage collections that allocation rate
// drives (together about 5% of the broker's CPU producing). A frame comes
// back only when its request says, as it is answered, that nothing reads
// it any more (protocol.Request.FrameFree): produce says so when every
// partition applied its records in place and kept nothing (single node).
// Anything else, including a frame whose connection closed mid-read, is
// left to the garbage collector.

const (
	minPooledShift = 14 // 16 KiB: smaller frames are cheap to allocate
	maxPooledShift = 24 // 16 MiB: larger ones are rare
)

// framePool holds idle frame buffers by power-of-two size; sync.Pool lets
// the collector take back what stays idle. Safe from any goroutine.
type framePool struct {
	classes [maxPooledShift - minPooledShift + 1]sync.Pool
}

// frames is the process's pool: every server's loops share it.
var frames framePool

// poolClass is the class whose buffers hold size bytes; -1: not pooled.
func poolClass(size int) int {
	if size < 1<<minPooledShift || size > 1<<maxPooledShift {
		return -1
	}
	return bits.Len(uint(size-1)) - minPooledShift
}

// get is a buffer of at least size bytes, nil when size is not pooled.
func (p *framePool) get(size int) *[]byte {
	c := poolClass(size)
	if c < 0 {
		return nil
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 1<<(c+minPooledShift))
	return &b
}

// put gives back a buffer get returned; nothing may read or write it after.
func (p *framePool) put(b *[]byte) {
	if c := poolClass(cap(*b)); c >= 0 && cap(*b) == 1<<(c+minPooledShift) {
		*b = (*b)[:cap(*b)]
		p.classes[c].Put(b)
	}
}

// produceKey is Produce's API key: the only request whose frames recycle.
const produceKey = 0

// frameBuf is an empty buffer of capacity n for a frame of size bytes
// whose API key is key (-1: not known yet): a pooled one when the frame is
// a produce read whole into it (n == size), recorded in cs.pooled; else a
// fresh one. On the loop, holding frameMu.
func (cs *connState) frameBuf(n, size, key int) []byte {
	if n == size && key == produceKey {
		if bp := frames.get(n); bp != nil {
			cs.pooled = bp
			return (*bp)[:0:n]
		}
	}
	cs.pooled = nil
	return make([]byte, 0, n)
}

// frameKey is the API key at the start of a frame's body, -1 when fewer
// than two bytes are there.
func frameKey(body []byte) int {
	if len(body) < 2 {
		return -1
	}
	return int(int16(uint16(body[0])<<8 | uint16(body[1])))
}
