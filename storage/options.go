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

// Options configures a Log. A zero field means "Kafka's default" (so the
// zero Options is a sensible topic config); use -1 for "infinite" where the
// field allows it. RetentionMs == 0 therefore means 7 days, not "delete
// immediately": pass 1 for that.
type Options struct {
	SegmentBytes       int64 // roll when the active segment would exceed this (default 1 GiB, capped at 2 GiB-1)
	SegmentMs          int64 // roll when the active segment's first append is older than this (default 7 days)
	IndexIntervalBytes int   // sparse index entry every N bytes (default 4096)
	RetentionMs        int64 // -1 infinite; delete closed segments whose max timestamp is older (default 7 days)
	RetentionBytes     int64 // -1 infinite (default); delete oldest closed segments while the log stays >= this
	Compact            bool  // cleanup.policy contains compact
	// DeleteDisabled: cleanup.policy lacks "delete" (compact only), so
	// EnforceRetention deletes nothing. Zero value keeps Kafka's default
	// policy, delete.
	DeleteDisabled     bool
	DeleteRetentionMs  int64 // how long tombstones survive after their first cleaning (default 1 day)
	MinCompactionLagMs int64 // records younger than this are never compacted (default 0)
	MaxCompactionLagMs int64 // <= 0 infinite (default); otherwise dirty data older than this must be compacted
	// MinCleanableDirtyRatio is the dirty fraction at which NeedsCompaction
	// says yes (default 0.5).
	MinCleanableDirtyRatio float64
	Now                    func() time.Time // injectable clock; nil = time.Now
	// Files bounds the log's open segment descriptors together with every
	// other Log sharing it; nil: DefaultFileCache(). Fixed at Open.
	Files *FileCache
}

func (o Options) withDefaults() Options {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	// Index positions are uint32 and Kafka caps segment.bytes at Int.MaxValue.
	o.SegmentBytes = min(o.SegmentBytes, math.MaxInt32)
	if o.SegmentMs <= 0 {
		o.SegmentMs = DefaultSegmentMs
	}
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.RetentionMs == 0 {
		o.RetentionMs = DefaultRetentionMs
	}
	if o.RetentionBytes == 0 {
		o.RetentionBytes = -1
	}
	if o.DeleteRetentionMs <= 0 {
		o.DeleteRetentionMs = DefaultDeleteRetentionMs
	}
	if o.MinCompactionLagMs < 0 {
		o.MinCompactionLagMs = 0
	}
	if o.MinCleanableDirtyRatio <= 0 {
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
