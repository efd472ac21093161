package storage

import (
	"math"
	"time"
)

// Kafka's defaults, applied to zero-valued Options fields.
const (
	DefaultSegmentBytes           = 1 << 30
	DefaultSegmentMs              = 7 * 24 * 60 * 60 * 1000
	DefaultIndexIntervalBytes     = 4096
	DefaultRetentionMs            = 7 * 24 * 60 * 60 * 1000
	DefaultDeleteRetentionMs      = 24 * 60 * 60 * 1000
	DefaultMinCleanableDirtyRatio = 0.5
)

// Options configures a Log. Each field means what the Kafka topic config
// of the same name means, zero included: retention.ms=0 deletes every
// closed segment whose records are all older than now, retention.bytes=0
// deletes every segment holding data, delete.retention.ms=0 drops
// tombstones at the first cleaning past their horizon,
// min.cleanable.dirty.ratio=0 compacts as soon as anything is dirty and
// index.interval.bytes=0 indexes every batch. Only fields whose Kafka
// minimum is above zero (segment.bytes, segment.ms, max.compaction.lag.ms)
// take Kafka's default when zero; -1 means unlimited where Kafka says so.
// The zero Options therefore retains nothing: start from DefaultOptions.
type Options struct {
	SegmentBytes       int64 // roll when the active segment would exceed this (0: 1 GiB; capped at 2 GiB-1)
	SegmentMs          int64 // roll when the active segment's first append is older than this (0: 7 days)
	IndexIntervalBytes int   // sparse index entry every N bytes; 0: every batch
	RetentionMs        int64 // < 0 infinite; delete segments whose max timestamp is older
	RetentionBytes     int64 // < 0 infinite; delete oldest segments while the log stays >= this
	Compact            bool  // cleanup.policy contains compact
	// DeleteDisabled: cleanup.policy lacks "delete" (compact only), so
	// EnforceRetention deletes nothing. Zero value keeps Kafka's default
	// policy, delete.
	DeleteDisabled     bool
	DeleteRetentionMs  int64 // how long tombstones survive after their first cleaning (< 0: 1 day)
	MinCompactionLagMs int64 // records younger than this are never compacted (< 0: 0)
	MaxCompactionLagMs int64 // <= 0 infinite; otherwise dirty data older than this must be compacted
	// MinCleanableDirtyRatio: NeedsCompaction says yes once the dirty
	// fraction exceeds it (Kafka's strict comparison; < 0: 0.5).
	MinCleanableDirtyRatio float64
	// NoReserve: appends reserve no blocks ahead (prealloc.go). For a log
	// fsynced after every append, where each fsync would convert them.
	NoReserve bool
	Now       func() time.Time // injectable clock; nil = time.Now
	// Files bounds the log's open segment descriptors together with every
	// other Log sharing it; nil: DefaultFileCache(). Fixed at Open.
	Files *FileCache
}

// DefaultOptions is Kafka's default topic config.
func DefaultOptions() Options {
	return Options{
		SegmentBytes:           DefaultSegmentBytes,
		SegmentMs:              DefaultSegmentMs,
		IndexIntervalBytes:     DefaultIndexIntervalBytes,
		RetentionMs:            DefaultRetentionMs,
		RetentionBytes:         -1,
		DeleteRetentionMs:      DefaultDeleteRetentionMs,
		MinCleanableDirtyRatio: DefaultMinCleanableDirtyRatio,
	}
}

// withDefaults fills what Kafka forbids (zero or negative where it needs a
// positive value) with Kafka's default; legal zeros stay.
func (o Options) withDefaults() Options {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	// Index positions are uint32 and Kafka caps segment.bytes at Int.MaxValue.
	o.SegmentBytes = min(o.SegmentBytes, math.MaxInt32)
	if o.SegmentMs <= 0 {
		o.SegmentMs = DefaultSegmentMs
	}
	if o.IndexIntervalBytes < 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.DeleteRetentionMs < 0 {
		o.DeleteRetentionMs = DefaultDeleteRetentionMs
	}
	if o.MinCompactionLagMs < 0 {
		o.MinCompactionLagMs = 0
	}
	if o.MinCleanableDirtyRatio < 0 {
		o.MinCleanableDirtyRatio = DefaultMinCleanableDirtyRatio
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// rollMs is the active segment's maximum age: segment.ms, shortened to
// max.compaction.lag.ms on compacted topics so dirty data becomes cleanable
// in time (KIP-354).
func (o Options) rollMs() int64 {
	if o.Compact && o.MaxCompactionLagMs > 0 {
		return min(o.SegmentMs, o.MaxCompactionLagMs)
	}
	return o.SegmentMs
}
