package recordlog

import (
	"slices"
	"strings"
)

// Index keeps a log's live records: what a compaction rewrites the log to
// and what Range iterates. A store that needs its own view of the records
// (the group coordinator keeps records per group, and one record deletes
// a whole group) supplies its own; the default keeps the last record of
// every key.
//
// The log calls an Index with its lock held, on the goroutine calling
// Open (for every record on disk, in file order) or a write (for every
// record written, after the write succeeded). An Index that the caller
// also reads must be guarded by a lock the caller holds around its own
// calls into the log: that lock comes first, the log's second. The
// applied-index record never reaches an Index.
type Index interface {
	// Add records r as written after everything added before it. r's
	// slices are never modified; the index may keep them.
	Add(r Record)
	// Live yields every live record, in the order a compaction writes
	// them. The order must depend only on the records, not on map
	// iteration, so that the same records give the same file.
	Live(yield func(Record) bool)
	// LiveBytes is the total size of the frames Live yields.
	LiveBytes() int64
}

// keyIndex is the default Index: the last record of every key, a
// tombstone forgetting the key; Live is in key order.
type keyIndex struct {
	live      map[string]Record
	liveBytes int64
}

func newKeyIndex() *keyIndex { return &keyIndex{live: map[string]Record{}} }

func (x *keyIndex) Add(r Record) {
	k := string(r.Key)
	if old, ok := x.live[k]; ok {
		x.liveBytes -= int64(len(old.Frame))
		delete(x.live, k)
	}
	if r.Tombstone {
		return
	}
	x.live[k] = r
	x.liveBytes += int64(len(r.Frame))
}

func (x *keyIndex) Live(yield func(Record) bool) {
	keys := make([]string, 0, len(x.live))
	for k := range x.live {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	for _, k := range keys {
		if !yield(x.live[k]) {
			return
		}
	}
}

func (x *keyIndex) LiveBytes() int64 { return x.liveBytes }
