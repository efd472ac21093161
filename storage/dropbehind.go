package storage

// Drop-behind: a node that serves no reads of a log (a raft follower only
// applies what the leader replicates) need not keep what it appends in the
// page cache. Kept, the cache grows by every byte written, and each fresh
// page costs the writer a first-touch fault on a VM whose kernel hands freed
// memory back to its host (bench/README.md): on this machine a follower
// spent 41 % of its CPU in that copy. Let go soon after being written back,
// the pages are freed and taken again by the next appends, so the cache
// stays a small window per partition and stays warm.
//
// Only the page cache changes: every byte is still in the file and read
// from disk when wanted (a new leader's first fetches of old data).

const (
	// dropWindow is how far behind the end of the log appended bytes
	// stay cached. Half of it back, writeback is started.
	dropWindow = 8 << 20
	// dropStep is how far the end moves between passes.
	dropStep = 1 << 20
)

// SetDropBehind says whether the logs sharing this cache keep what they
// append in the page cache (false, the default) or let it go once written
// back. Any goroutine; appends after it follow it.
func (c *FileCache) SetDropBehind(on bool) { c.dropBehind.Store(on) }

// DropBehind reports SetDropBehind's last setting.
func (c *FileCache) DropBehind() bool { return c.dropBehind.Load() }

// writeBehindStep is how much a log appends between two starts of
// writeback under write-behind.
const writeBehindStep = 4 << 20

// SetWriteBehind says whether the logs sharing this cache start the
// writeback of what they append as they go (where they keep it cached:
// drop-behind starts its own). A cluster node's partition segments are
// not fsynced as they are written (the raft log is what is durable), but
// every raft snapshot fsyncs all of them: left to the kernel's lazy
// writeback, each snapshot then flushed the ~256 MiB applied since the
// last one at once, on every node together, stalling the raft log's own
// fsyncs behind it. Any goroutine.
func (c *FileCache) SetWriteBehind(on bool) { c.writeBehind.Store(on) }

// writeBehind, after an append to s that ends at end, starts writeback of
// what was appended since the last start, a step at a time. Owner-only.
func (s *segment) writeBehind(end int64) {
	if end-s.writtenBack < writeBehindStep {
		return
	}
	to := end / writeBehindStep * writeBehindStep
	s.log.startWriteback(s.writtenBack, to)
	s.writtenBack = to
}

// dropBehind, after an append to s that ends at end, drops from the page
// cache the bytes a window back and starts writeback of those half a window
// back. Owner-only.
func (s *segment) dropBehind(end int64) {
	if end-s.dropped < dropWindow+dropStep {
		return
	}
	// A whole step: the kernel drops whole folios only, and folios
	// (as large as a write, at most) are aligned to their size.
	to := (end - dropWindow) / dropStep * dropStep
	s.log.dropCache(s.dropped, to, end-dropWindow/2)
	s.dropped = to
}
