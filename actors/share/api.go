// Package share is the share-partition core of share groups (KIP-932):
// per share group × topic-partition, the window of in-flight records
// between the share-partition start offset (SPSO) and end offset (SPEO),
// their states (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED), delivery
// counts and acquisition locks. The logic is a pure state machine
// (state.go); an actor per share-partition runs it, reads the partition
// log, persists the durable part through the replicator (store.go) and
// keeps the lock timer; the Manager routes requests to those actors.
package share

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/regent-broker/regent/actors/groupconfig"
	"github.com/regent-broker/regent/actors/replication"
)

// Key names one share-partition.
type Key struct {
	Group     string
	Topic     string
	TopicID   [16]byte
	Partition int32
}

// AckType is an acknowledgement type, with Kafka's values.
type AckType int8

const (
	AckGap     AckType = 0 // the offset holds no record (compacted, marker)
	AckAccept  AckType = 1 // processed: ACKNOWLEDGED
	AckRelease AckType = 2 // give back: AVAILABLE (ARCHIVED at the delivery limit)
	AckReject  AckType = 3 // unprocessable: ARCHIVED
	AckRenew   AckType = 4 // keep the lock: the lock duration starts again
)

// AckBatch acknowledges the offsets First..Last (inclusive): with one type
// for the whole range, or one type per offset (len(Types) == Last-First+1).
type AckBatch struct {
	First, Last int64
	Types       []AckType
}

// AcquiredRange is offsets First..Last (inclusive) acquired by a member,
// each delivered DeliveryCount times counting this delivery.
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int16
}

// AcquireRequest asks for records of one share-partition for a member.
type AcquireRequest struct {
	Key    Key
	Member string
	// MaxRecords bounds the records acquired (<= 0: 500, the client's
	// default). BatchSize is ShareFetch's (<= 0: none): in batch_optimized
	// mode a run of new records longer than it is answered as several
	// ranges, cut at stored batch boundaries, as Kafka's (batchsize.go).
	MaxRecords, BatchSize int32
	// RecordLimit is ShareAcquireMode record_limit: at most MaxRecords,
	// strictly. Otherwise (batch_optimized) whole stored batches are
	// acquired and the last one may take the count past MaxRecords.
	RecordLimit bool
	// MaxBytes bounds the record bytes read (<= 0: 1 MiB). The first
	// batch is returned whatever its size, as Fetch does.
	MaxBytes int32
}

// AcquireResult is the answer to Acquire. ErrorCode 0 with no Acquired
// ranges means nothing is available now (the caller may long-poll).
type AcquireResult struct {
	ErrorCode int16
	// Records is the stored record batches covering the acquired ranges
	// (they may hold offsets outside them, which the client skips). The
	// caller owns it.
	Records  []byte
	Acquired []AcquiredRange
	// LogStartOffset and HighWatermark of the partition at the read.
	LogStartOffset, HighWatermark int64
	// LockTimeoutMs is the acquisition lock duration in force.
	LockTimeoutMs int32
}

// TopicPartition names a partition in the admin calls.
type TopicPartition struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
}

// StartOffset is a share-partition's start offset (DescribeShareGroupOffsets
// answers it; AlterStartOffsets takes Topic, TopicID, Partition and
// StartOffset).
type StartOffset struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
	// StartOffset is the SPSO; -1 when the share-partition was never
	// initialised.
	StartOffset int64
	// Lag is the records from the SPSO to the high watermark not yet
	// acknowledged or archived; -1 when unknown (never initialised, or
	// the partition is not found).
	Lag       int64
	ErrorCode int16
}

// StartOffsetResult is AlterStartOffsets' answer for one partition.
type StartOffsetResult struct {
	Topic     string
	Partition int32
	ErrorCode int16
}

// Config is a share group's configs in force (from actors/groupconfig).
// A zero field means Kafka's default.
type Config struct {
	// RecordLockDuration is share.record.lock.duration.ms (30 s).
	RecordLockDuration time.Duration
	// DeliveryCountLimit is share.delivery.count.limit (5): a record
	// delivered that many times and not accepted is ARCHIVED.
	DeliveryCountLimit int
	// MaxRecordLocks is share.partition.max.record.locks (2000): the
	// bound on in-flight records per share-partition.
	MaxRecordLocks int
	// AutoOffsetReset is share.auto.offset.reset: "latest" (""),
	// "earliest" or "by_duration:..." with ResetBy its duration.
	AutoOffsetReset string
	ResetBy         time.Duration
	// ReadCommitted is share.isolation.level read_committed: records up
	// to the last stable offset, aborted transactions' records archived.
	ReadCommitted bool
}

// ConfigFrom takes the share settings out of a group's resolved configs.
func ConfigFrom(v groupconfig.Values) Config {
	return Config{
		RecordLockDuration: v.ShareRecordLockDuration,
		DeliveryCountLimit: v.ShareDeliveryCountLimit,
		MaxRecordLocks:     v.SharePartitionMaxRecordLocks,
		AutoOffsetReset:    v.ShareAutoOffsetReset,
		ResetBy:            v.ShareAutoOffsetResetBy,
		ReadCommitted:      v.ShareIsolationLevel == "read_committed",
	}
}

// AbortedTxn is an aborted transaction whose records may lie in a read
// range: producer ProducerID's transactional records from FirstOffset up
// to its ABORT marker at LastOffset.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// Log is the read side of a partition that the share-partitions read
// (FromPartition adapts *partition.Partition; tests script one). Every
// method is called from share-partition actors, concurrently for
// different share groups, and must not block on the partition's actor.
type Log interface {
	// Read returns whole stored batches from the one holding offset,
	// never past the high watermark (the plain Fetch's read).
	Read(offset int64, maxBytes int) ([]byte, error)
	// Bounds returns the log start offset, the high watermark, the last
	// stable offset and the aborted transactions in [from, lso), all from
	// one view of the partition.
	Bounds(from int64) (logStart, highWatermark, lastStable int64, aborted []AbortedTxn)
	// OffsetForTimestamp is the first offset with a timestamp >= ts
	// (found false: none).
	OffsetForTimestamp(ts int64) (offset int64, found bool, err error)
}

// Options configures the Manager. A zero field means its default.
type Options struct {
	// DataDir is the broker's data directory; the state is in
	// DataDir/share/.
	DataDir string
	Root    *actor.RootContext
	Logger  *slog.Logger
	// Logs finds a partition's log; false: the partition does not
	// exist (UNKNOWN_TOPIC_OR_PARTITION).
	Logs func(topic string, partition int32) (Log, bool)
	// Config gives a group's share configs; nil: Kafka's defaults.
	Config func(group string) Config
	// Repl orders the state writes; nil: a local replicator.
	Repl replication.Replicator
	// Fsync makes every state write fsync before it is answered.
	Fsync bool
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
	// Standby opens the store and registers it with Repl so replicated
	// writes are applied, but serves nothing (COORDINATOR_NOT_AVAILABLE,
	// as a share-partition leader that is not ready) until Activate: a
	// raft follower.
	Standby bool
}
