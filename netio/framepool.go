package netio

import "github.com/regent-broker/regent/storage/bufpool"

// Produce frames are the broker's largest allocations by far: every
// produced byte arrives in one. Their buffers are recycled (bufpool),
// sparing the allocation, its zeroing and the garbage collections that
// allocation rate drives (about 15% of the broker's CPU producing, single
// node). A frame comes back only when its request says, as it is
// answered, that nothing reads it any more (protocol.Request.FrameFree):
// produce says so when every partition's answer says its records are free
// (partition.ProduceResult.RecordsFree: applied in place on a single node,
// encoded into the raft entry on a cluster leader). Anything else,
// including a frame whose connection closed mid-read, is left to the
// garbage collector.

// frames is the process's pool of frame buffers: every server's loops
// share it.
var frames bufpool.Pool

// produceKey is Produce's API key: the only request whose frames recycle.
const produceKey = 0

// frameBuf is an empty buffer of capacity n for a frame of size bytes
// whose API key is key (-1: not known yet): a pooled one when the frame is
// a produce read whole into it (n == size), recorded in cs.pooled; else a
// fresh one. A pooled buffer's capacity beyond n (under 25%, bufpool's
// classes) is not charged to the request budget: the memory a client holds
// with frames stays within 1.25 times its charge. On the loop, holding
// frameMu.
func (cs *connState) frameBuf(n, size, key int) []byte {
	if n == size && key == produceKey {
		if bp := frames.Get(n); bp != nil {
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
