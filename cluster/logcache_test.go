package cluster

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"
)

// countingStore is raft's in-memory store counting the GetLogs it serves.
type countingStore struct {
	*raft.InmemStore
	gets int
}

func (s *countingStore) GetLog(idx uint64, l *raft.Log) error {
	s.gets++
	return s.InmemStore.GetLog(idx, l)
}

func (s *countingStore) IsMonotonic() bool { return true }

// TestLogCacheBoundedByBytes: the cache holds at most its byte cap, serves
// the newest entries from memory and the rest from the store, and every
// entry reads back right whichever serves it.
func TestLogCacheBoundedByBytes(t *testing.T) {
	store := &countingStore{InmemStore: raft.NewInmemStore()}
	const entry = 10_000
	c := newLogCache(store, 64, 10*(entry+64))
	data := func(i uint64) []byte { return bytes.Repeat([]byte{byte(i)}, entry) }
	next := uint64(1)
	for batch := range 40 {
		var logs []*raft.Log
		for range batch%5 + 1 {
			logs = append(logs, &raft.Log{Index: next, Term: 1, Data: data(next)})
			next++
		}
		if err := c.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
		if c.bytes > c.maxBytes {
			t.Fatalf("after batch %d the cache holds %d bytes, over its cap %d", batch, c.bytes, c.maxBytes)
		}
	}
	last := next - 1
	get := func(i uint64) {
		t.Helper()
		var l raft.Log
		if err := c.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if l.Index != i || !bytes.Equal(l.Data, data(i)) {
			t.Fatalf("GetLog(%d) returned entry %d or other data", i, l.Index)
		}
	}
	for i := last - 9; i <= last; i++ {
		get(i)
	}
	if store.gets != 0 {
		t.Fatalf("the 10 newest entries (within the cap) took %d store reads", store.gets)
	}
	for i := uint64(1); i <= last-10; i++ {
		get(i)
	}
	if store.gets != int(last-10) {
		t.Fatalf("%d store reads for the %d entries past the cap", store.gets, last-10)
	}
	if !c.IsMonotonic() {
		t.Fatal("IsMonotonic not passed through: raft would install snapshots as for a non-monotonic store")
	}
	if err := c.DeleteRange(last-3, last); err != nil {
		t.Fatal(err)
	}
	if c.bytes != 0 {
		t.Fatalf("%d bytes cached after DeleteRange", c.bytes)
	}
	store.gets = 0
	get(last - 5)
	if store.gets != 1 {
		t.Fatal("an entry was served from the cache after DeleteRange emptied it")
	}
	// After the reset, storing goes on from where the log is.
	if err := c.StoreLogs([]*raft.Log{{Index: last - 3, Term: 2, Data: data(last - 3)}}); err != nil {
		t.Fatal(err)
	}
	store.gets = 0
	get(last - 3)
	if store.gets != 0 {
		t.Fatal("an entry stored after DeleteRange is not cached")
	}
}

// batchStore records the bytes of each StoreLogs call.
type batchStore struct {
	*raft.InmemStore
	batches []int64
}

func (s *batchStore) StoreLogs(logs []*raft.Log) error {
	var n int64
	for _, l := range logs {
		n += cachedSize(l)
	}
	s.batches = append(s.batches, n)
	return s.InmemStore.StoreLogs(logs)
}

// TestLogCacheStoresInChunks: a batch of large entries reaches the store in
// appends of at most maxStoreBytes (one entry over it alone), in order, all
// of them.
func TestLogCacheStoresInChunks(t *testing.T) {
	store := &batchStore{InmemStore: raft.NewInmemStore()}
	c := newLogCache(store, 256, 64<<20)
	var logs []*raft.Log
	sizes := []int{1 << 20, 1 << 20, 1 << 20, 1 << 20, 5 << 20, 100, 1 << 20, 200 << 10}
	for i, n := range sizes {
		logs = append(logs, &raft.Log{Index: uint64(i + 1), Term: 1, Data: bytes.Repeat([]byte{byte(i)}, n)})
	}
	if err := c.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if len(store.batches) < 3 {
		t.Fatalf("%d appends: the batch was not split", len(store.batches))
	}
	for i, n := range store.batches {
		if n > maxStoreBytes && n < 5<<20 {
			t.Fatalf("append %d holds %d bytes, over %d", i, n, maxStoreBytes)
		}
	}
	for i, n := range sizes {
		var l raft.Log
		if err := store.GetLog(uint64(i+1), &l); err != nil || len(l.Data) != n {
			t.Fatalf("entry %d: %v, %d bytes, want %d", i+1, err, len(l.Data), n)
		}
	}
}

// TestLogCacheNothingBelowFirstIndex: after raft compacts the head of the
// log, no entry below the new first index reads back, not even one still
// in raft-wal's tail segment (whose writer serves it), so a follower that
// far behind gets a snapshot whatever the segment boundaries.
func TestLogCacheNothingBelowFirstIndex(t *testing.T) {
	store, err := openWALStore(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c := newLogCache(store, 16, 1<<20)
	var logs []*raft.Log
	for i := uint64(1); i <= 100; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, 1000)})
	}
	if err := c.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteRange(1, 50); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := store.GetLog(10, &l); err != nil {
		t.Logf("raft-wal itself no longer serves index 10 below its first index (%v): the check is now belt and braces", err)
	}
	for _, idx := range []uint64{1, 10, 50} {
		if err := c.GetLog(idx, &l); err != raft.ErrLogNotFound {
			t.Fatalf("GetLog(%d) after compacting to 50: %v (index %d), want ErrLogNotFound", idx, err, l.Index)
		}
	}
	for _, idx := range []uint64{51, 100} {
		if err := c.GetLog(idx, &l); err != nil || l.Index != idx || l.Data[0] != byte(idx) {
			t.Fatalf("GetLog(%d): %v, index %d", idx, err, l.Index)
		}
	}
}
