package logconfig

import (
	"sort"
	"strconv"
)

// notEnforced starts the Doc of every key Regent stores but does not act on.
const notEnforced = "Stored and reported; Regent does not enforce it yet"

const maxLong = "9223372036854775807"

// MessageTimestampAfterMaxMsDefault is message.timestamp.after.max.ms (and
// log.message.timestamp.after.max.ms) when not set: one hour, Kafka 4's
// default (KIP-1030; Long.MAX_VALUE before 4.0). A CreateTime batch
// stamped more than an hour ahead of the broker clock is refused.
const MessageTimestampAfterMaxMsDefault = 3600000

// Kafka 4.x topic defaults that other code may want to refer to.
const (
	DefaultSegmentBytes    = 1 << 30
	MinSegmentBytes        = 1 << 20 // Kafka 4.0 raised the floor from 14 bytes (KIP-1030)
	DefaultMaxMessageBytes = 1<<20 + 12
	DefaultRetentionMs     = 7 * 24 * 3600 * 1000
	DefaultSegmentMs       = 7 * 24 * 3600 * 1000
)

func syn(name string) synonym { return synonym{name: name} }

func topicDef(name string, t Type, dflt string, v validator, enforced bool, doc string, syns ...synonym) Def {
	d := Def{
		Name:       name,
		Type:       t,
		Default:    dflt,
		HasDefault: true,
		Doc:        doc,
		Enforced:   enforced,
		synonyms:   syns,
	}
	if len(syns) > 0 {
		d.BrokerName = syns[0].name
	}
	d.validate = func(raw string) error { return v(name, raw) }
	return d
}

// topicDefs is every topic config a Kafka 4.x broker accepts, minus the
// internal test-only internal.segment.bytes. message.format.version,
// message.timestamp.difference.max.ms and message.downconversion.enable
// are gone from Kafka 4.x topic configs and are refused as unknown, as
// Kafka 4.x does.
var topicDefs = func() []Def {
	defs := []Def{
		topicDef("cleanup.policy", TypeList, "delete", listIn("compact", "delete"), true,
			`How old segments are retired: "delete" drops them by age or size, "compact" keeps the latest record per key; both may be listed, and an empty list keeps everything.`,
			syn("log.cleanup.policy")),
		topicDef("compression.gzip.level", TypeInt, "-1", gzipLevelV(), false,
			notEnforced+": Regent never recompresses batches. Level for gzip when compression.type=gzip (1-9, -1 for the codec default).",
			syn("compression.gzip.level")),
		topicDef("compression.lz4.level", TypeInt, "9", integralV(TypeInt, bnd(1), bnd(17)), false,
			notEnforced+": Regent never recompresses batches. Level for lz4 when compression.type=lz4.",
			syn("compression.lz4.level")),
		topicDef("compression.type", TypeString, "producer",
			stringIn("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), false,
			notEnforced+`: Regent keeps batches as the producer sent them, which is what "producer" means; any other codec is only recorded.`,
			syn("compression.type")),
		topicDef("compression.zstd.level", TypeInt, "3", integralV(TypeInt, bnd(-131072), bnd(22)), false,
			notEnforced+": Regent never recompresses batches. Level for zstd when compression.type=zstd.",
			syn("compression.zstd.level")),
		topicDef("delete.retention.ms", TypeLong, "86400000", integralV(TypeLong, bnd(0), nil), true,
			"How long a tombstone survives in a compacted topic once the cleaner has passed over it.",
			syn("log.cleaner.delete.retention.ms")),
		topicDef("file.delete.delay.ms", TypeLong, "60000", integralV(TypeLong, bnd(0), nil), false,
			notEnforced+": the storage engine decides when retired segment files are removed.",
			syn("log.segment.delete.delay.ms")),
		topicDef("flush.messages", TypeLong, maxLong, integralV(TypeLong, bnd(1), nil), false,
			notEnforced+": durability comes from replication and the storage engine's own sync policy.",
			syn("log.flush.interval.messages")),
		topicDef("flush.ms", TypeLong, maxLong, integralV(TypeLong, bnd(0), nil), false,
			notEnforced+": durability comes from replication and the storage engine's own sync policy.",
			syn("log.flush.interval.ms"), syn("log.flush.scheduler.interval.ms")),
		topicDef("follower.replication.throttled.replicas", TypeList, "", throttledReplicasV(), false,
			notEnforced+`: replication quotas are not implemented. "*" or partition:broker pairs whose follower side would be throttled.`),
		topicDef("index.interval.bytes", TypeInt, "4096", integralV(TypeInt, bnd(0), nil), true,
			"Bytes of records between two entries of a segment's offset index.",
			syn("log.index.interval.bytes")),
		topicDef("leader.replication.throttled.replicas", TypeList, "", throttledReplicasV(), false,
			notEnforced+`: replication quotas are not implemented. "*" or partition:broker pairs whose leader side would be throttled.`),
		topicDef("local.retention.bytes", TypeLong, "-2", integralV(TypeLong, bnd(-2), nil), false,
			notEnforced+": tiered storage is not supported. Local-tier size limit; -2 means retention.bytes.",
			syn("log.local.retention.bytes")),
		topicDef("local.retention.ms", TypeLong, "-2", integralV(TypeLong, bnd(-2), nil), false,
			notEnforced+": tiered storage is not supported. Local-tier time limit; -2 means retention.ms.",
			syn("log.local.retention.ms")),
		topicDef("max.compaction.lag.ms", TypeLong, maxLong, integralV(TypeLong, bnd(1), nil), true,
			"Longest time a record may stay ineligible for compaction.",
			syn("log.cleaner.max.compaction.lag.ms")),
		topicDef("max.message.bytes", TypeInt, strconv.Itoa(DefaultMaxMessageBytes), integralV(TypeInt, bnd(0), nil), true,
			"Largest record batch the topic accepts, measured after compression.",
			syn("message.max.bytes")),
		topicDef("message.timestamp.after.max.ms", TypeLong, strconv.Itoa(MessageTimestampAfterMaxMsDefault), integralV(TypeLong, bnd(0), nil), true,
			"With CreateTime, how far ahead of the broker clock a batch timestamp may be before the batch is refused.",
			syn("log.message.timestamp.after.max.ms")),
		topicDef("message.timestamp.before.max.ms", TypeLong, maxLong, integralV(TypeLong, bnd(0), nil), true,
			"With CreateTime, how far behind the broker clock a batch timestamp may be before the batch is refused.",
			syn("log.message.timestamp.before.max.ms")),
		topicDef("message.timestamp.type", TypeString, "CreateTime", stringIn("CreateTime", "LogAppendTime"), true,
			"CreateTime keeps the producer's timestamps; LogAppendTime stamps batches with the broker clock on append.",
			syn("log.message.timestamp.type")),
		topicDef("min.cleanable.dirty.ratio", TypeDouble, "0.5", doubleV(bnd(0), bnd(1)), true,
			"Share of a compacted log that must be uncleaned before the cleaner works on it.",
			syn("log.cleaner.min.cleanable.ratio")),
		topicDef("min.compaction.lag.ms", TypeLong, "0", integralV(TypeLong, bnd(0), nil), true,
			"Shortest time a record stays uncompacted.",
			syn("log.cleaner.min.compaction.lag.ms")),
		topicDef("min.insync.replicas", TypeInt, "1", integralV(TypeInt, bnd(1), nil), true,
			"Fewest in-sync replicas that must hold a write for an acks=all produce to succeed.",
			syn("min.insync.replicas")),
		topicDef("preallocate", TypeBoolean, "false", boolV(), false,
			notEnforced+": segment files are sized by the storage engine.",
			syn("log.preallocate")),
		topicDef("remote.copy.lag.bytes", TypeLong, "0", integralV(TypeLong, bnd(-1), nil), false,
			notEnforced+": tiered storage is not supported. (Kafka 4.4+) Bytes kept local before upload to the remote tier."),
		topicDef("remote.copy.lag.ms", TypeLong, "0", integralV(TypeLong, bnd(-1), nil), false,
			notEnforced+": tiered storage is not supported. (Kafka 4.4+) Time kept local before upload to the remote tier."),
		topicDef("remote.log.copy.disable", TypeBoolean, "false", boolV(), false,
			notEnforced+": tiered storage is not supported. Makes the remote tier read-only."),
		topicDef("remote.log.delete.on.disable", TypeBoolean, "false", boolV(), false,
			notEnforced+": tiered storage is not supported. Deletes remote data when tiering is turned off."),
		topicDef("remote.storage.enable", TypeBoolean, "false", notTrue(tieredRefusal), false,
			"Tiered storage for the topic. Regent does not support tiered storage: false is stored and reported, true is refused."),
		topicDef("retention.bytes", TypeLong, "-1", integralV(TypeLong, nil, nil), true,
			"Size a partition may reach before its oldest segments are deleted (delete policy); -1 means no limit.",
			syn("log.retention.bytes")),
		topicDef("retention.ms", TypeLong, strconv.Itoa(DefaultRetentionMs), integralV(TypeLong, bnd(-1), nil), true,
			"Age after which a segment is deleted (delete policy); -1 means no limit.",
			syn("log.retention.ms"),
			synonym{"log.retention.minutes", convMinutesToMs},
			synonym{"log.retention.hours", convHoursToMs}),
		topicDef("segment.bytes", TypeInt, strconv.Itoa(DefaultSegmentBytes), integralV(TypeInt, bnd(MinSegmentBytes), nil), true,
			"Size at which the active segment is rolled.",
			syn("log.segment.bytes")),
		topicDef("segment.index.bytes", TypeInt, "10485760", integralV(TypeInt, bnd(4), nil), false,
			notEnforced+": index files are sized by the storage engine.",
			syn("log.index.size.max.bytes")),
		topicDef("segment.jitter.ms", TypeLong, "0", integralV(TypeLong, bnd(0), nil), false,
			notEnforced+". Random amount that would be taken off segment.ms to spread segment rolls.",
			syn("log.roll.jitter.ms"), synonym{"log.roll.jitter.hours", convHoursToMs}),
		topicDef("segment.ms", TypeLong, strconv.Itoa(DefaultSegmentMs), integralV(TypeLong, bnd(1), nil), true,
			"Age at which the active segment is rolled even if it is not full.",
			syn("log.roll.ms"), synonym{"log.roll.hours", convHoursToMs}),
		topicDef("unclean.leader.election.enable", TypeBoolean, "false", boolV(), false,
			notEnforced+". Would let an out-of-sync replica become leader, losing data, when no in-sync replica is left.",
			syn("unclean.leader.election.enable")),
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
	return defs
}()

const tieredRefusal = "tiered storage is not supported by Regent"

var topicIndex = func() map[string]int {
	m := make(map[string]int, len(topicDefs))
	for i, d := range topicDefs {
		m[d.Name] = i
	}
	return m
}()

// Topic returns every topic-level def, sorted by name. The slice is a copy.
func Topic() []Def {
	out := make([]Def, len(topicDefs))
	copy(out, topicDefs)
	return out
}

// LookupTopic returns the def of a topic config key.
func LookupTopic(name string) (Def, bool) {
	i, ok := topicIndex[name]
	if !ok {
		return Def{}, false
	}
	return topicDefs[i], true
}
