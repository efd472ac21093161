package cluster

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// logCache keeps the latest raft entries in memory, as raft.LogCache does,
// but bounded by bytes as well as by count.
//
// Why: raft.LogCache holds a fixed number of entries whatever their size.
// With 256 slots and entries of up to maxEntryBytes (the 4x4 bench's
// coalesced produces come close), it could hold 256 MB; a follower's heap
// profile showed 52 MB of cached entries, beside raft-wal's append buffers
// (see StoreLogs), when nodes peaked at 614-756 MB RSS with GOGC=200. The
// cache exists so the leader sends followers in step from memory; they lag
// by at most the entries in flight. The byte cap (logCacheBytes) is half
// of what can be in flight with the largest entries; an entry evicted
// early is read back from the wal.
//
// Ownership: any goroutine; mu guards ring, bytes and lo.
type logCache struct {
	store    raft.LogStore
	maxBytes int64

	mu    sync.RWMutex
	ring  []*raft.Log // entry i in slot i % len(ring)
	bytes int64       // cachedSize summed over the ring
	// lo is the eviction cursor: no entry below it is cached.
	lo uint64
}

func newLogCache(store raft.LogStore, entries int, maxBytes int64) *logCache {
	return &logCache{store: store, maxBytes: maxBytes, ring: make([]*raft.Log, entries)}
}

func cachedSize(l *raft.Log) int64 { return int64(len(l.Data)+len(l.Extensions)) + 64 }

// IsMonotonic passes the store's answer through: raft installs snapshots
// differently for a monotonic store, and raft-wal is one.
func (c *logCache) IsMonotonic() bool {
	m, ok := c.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (c *logCache) GetLog(idx uint64, log *raft.Log) error {
	c.mu.RLock()
	cached := c.ring[idx%uint64(len(c.ring))]
	c.mu.RUnlock()
	if cached != nil && cached.Index == idx {
		*log = *cached
		return nil
	}
	// raft-wal's tail segment still serves entries below a head
	// truncation (its writer does not check the new first index), so the
	// leader would replicate entries it has compacted away, or send a
	// snapshot, depending on where its segment boundaries fall. Below the
	// first index an entry is gone, as raft expects: a follower that far
	// behind gets a snapshot.
	if first, err := c.store.FirstIndex(); err == nil && idx < first {
		return raft.ErrLogNotFound
	}
	return c.store.GetLog(idx, log)
}

func (c *logCache) StoreLog(log *raft.Log) error { return c.StoreLogs([]*raft.Log{log}) }

// StoreLogs stores logs, then caches them (only once stored, as
// raft.LogCache does).
//
// A batch is stored in chunks of at most maxStoreBytes (and at least one
// entry): raft-wal grows each segment writer's buffer to the largest
// batch it wrote and keeps it until the segment is dropped, so 64 entries
// of up to maxEntryBytes held about 100 MB of buffers per node in the 4x4
// bench. A chunk costs an fsync, which at these sizes is cheap beside the
// bytes. A failure after some chunks leaves those entries stored, as a
// crash mid-batch would; raft already handles that.
func (c *logCache) StoreLogs(logs []*raft.Log) error {
	for len(logs) > 0 {
		n, size := 1, cachedSize(logs[0])
		for n < len(logs) && size+cachedSize(logs[n]) <= maxStoreBytes {
			size += cachedSize(logs[n])
			n++
		}
		if err := c.store.StoreLogs(logs[:n]); err != nil {
			return fmt.Errorf("store raft entries %d-%d: %w", logs[0].Index, logs[n-1].Index, err)
		}
		c.cache(logs[:n])
		logs = logs[n:]
	}
	return nil
}

// maxStoreBytes bounds one raft-wal append; below a power of two, so
// raft-wal's doubling buffer stops at 4 MiB.
const maxStoreBytes = 3<<20 + 512<<10

// cache puts stored logs in the ring and evicts the oldest entries while
// the cache is over its byte cap.
func (c *logCache) cache(logs []*raft.Log) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := uint64(len(c.ring))
	for _, l := range logs {
		slot := &c.ring[l.Index%n]
		if *slot != nil {
			c.bytes -= cachedSize(*slot)
		}
		*slot = l
		c.bytes += cachedSize(l)
	}
	last := logs[len(logs)-1].Index
	if last >= n && c.lo < last-n+1 {
		c.lo = last - n + 1 // older entries' slots now hold newer ones
	}
	// The slot at lo holds lo itself or an older entry (raft indexes are
	// contiguous and lo+n is past last); either goes.
	for c.bytes > c.maxBytes && c.lo <= last {
		slot := &c.ring[c.lo%n]
		if *slot != nil && (*slot).Index <= c.lo {
			c.bytes -= cachedSize(*slot)
			*slot = nil
		}
		c.lo++
	}
}

func (c *logCache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }
func (c *logCache) LastIndex() (uint64, error)  { return c.store.LastIndex() }

// DeleteRange empties the cache (raft deletes a follower's conflicting
// suffix, or the head after a snapshot) and deletes from the store.
func (c *logCache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	clear(c.ring)
	c.bytes, c.lo = 0, 0
	c.mu.Unlock()
	return c.store.DeleteRange(min, max)
}
