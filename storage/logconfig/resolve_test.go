package logconfig

import (
	"math"
	"strings"
	"testing"
)

func TestResolveDefaults(t *testing.T) {
	got, err := Resolve(nil, Broker{})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		CleanupDelete:               true,
		RetentionMs:                 604800000,
		RetentionBytes:              -1,
		SegmentBytes:                1073741824,
		SegmentMs:                   604800000,
		DeleteRetentionMs:           86400000,
		MinCompactionLagMs:          0,
		MaxCompactionLagMs:          math.MaxInt64,
		MinCleanableDirtyRatio:      0.5,
		MaxMessageBytes:             1048588,
		MinInsyncReplicas:           1,
		MessageTimestampBeforeMaxMs: math.MaxInt64,
		MessageTimestampAfterMaxMs:  3600000,
		CompressionType:             "producer",
		IndexIntervalBytes:          4096,
		ProducerIDExpirationMs:      86400000,
	}
	if got != want {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestResolvePrecedence(t *testing.T) {
	type kv = map[string]string
	cases := []struct {
		name   string
		topic  kv
		broker kv
		check  func(Config) (got, want any)
	}{
		{"log.retention.hours", nil, kv{"log.retention.hours": "1"},
			func(c Config) (any, any) { return c.RetentionMs, int64(3600000) }},
		{"log.retention.minutes", nil, kv{"log.retention.minutes": "5"},
			func(c Config) (any, any) { return c.RetentionMs, int64(300000) }},
		{"minutes over hours", nil, kv{"log.retention.minutes": "5", "log.retention.hours": "1"},
			func(c Config) (any, any) { return c.RetentionMs, int64(300000) }},
		{"ms over minutes and hours", nil, kv{"log.retention.ms": "1000", "log.retention.minutes": "5", "log.retention.hours": "1"},
			func(c Config) (any, any) { return c.RetentionMs, int64(1000) }},
		{"negative broker retention is unlimited", nil, kv{"log.retention.ms": "-5"},
			func(c Config) (any, any) { return c.RetentionMs, int64(-1) }},
		{"negative hours is unlimited", nil, kv{"log.retention.hours": "-1"},
			func(c Config) (any, any) { return c.RetentionMs, int64(-1) }},
		{"topic over broker", kv{"retention.ms": "42"}, kv{"log.retention.ms": "1000"},
			func(c Config) (any, any) { return c.RetentionMs, int64(42) }},
		{"producer.id.expiration.ms (broker only)", kv{"producer.id.expiration.ms": "5"}, kv{"producer.id.expiration.ms": "60000"},
			func(c Config) (any, any) { return c.ProducerIDExpirationMs, int64(60000) }},
		{"log.roll.hours", nil, kv{"log.roll.hours": "2"},
			func(c Config) (any, any) { return c.SegmentMs, int64(7200000) }},
		{"log.roll.ms over hours", nil, kv{"log.roll.ms": "1000", "log.roll.hours": "2"},
			func(c Config) (any, any) { return c.SegmentMs, int64(1000) }},
		{"log.retention.bytes", nil, kv{"log.retention.bytes": "1024"},
			func(c Config) (any, any) { return c.RetentionBytes, int64(1024) }},
		{"log.segment.bytes", nil, kv{"log.segment.bytes": "2097152"},
			func(c Config) (any, any) { return c.SegmentBytes, int64(2097152) }},
		{"message.max.bytes", nil, kv{"message.max.bytes": "500"},
			func(c Config) (any, any) { return c.MaxMessageBytes, int32(500) }},
		{"min.insync.replicas broker", nil, kv{"min.insync.replicas": "2"},
			func(c Config) (any, any) { return c.MinInsyncReplicas, int32(2) }},
		{"log.message.timestamp.type", nil, kv{"log.message.timestamp.type": "LogAppendTime"},
			func(c Config) (any, any) { return c.LogAppendTime, true }},
		{"topic CreateTime over broker LogAppendTime", kv{"message.timestamp.type": "CreateTime"}, kv{"log.message.timestamp.type": "LogAppendTime"},
			func(c Config) (any, any) { return c.LogAppendTime, false }},
		{"log.cleanup.policy compact", nil, kv{"log.cleanup.policy": "compact"},
			func(c Config) (any, any) { return [2]bool{c.CleanupDelete, c.CleanupCompact}, [2]bool{false, true} }},
		{"both policies", kv{"cleanup.policy": "compact, delete"}, nil,
			func(c Config) (any, any) { return [2]bool{c.CleanupDelete, c.CleanupCompact}, [2]bool{true, true} }},
		{"empty policy keeps everything", kv{"cleanup.policy": ""}, nil,
			func(c Config) (any, any) { return [2]bool{c.CleanupDelete, c.CleanupCompact}, [2]bool{false, false} }},
		{"log.cleaner.min.cleanable.ratio", nil, kv{"log.cleaner.min.cleanable.ratio": "0.9"},
			func(c Config) (any, any) { return c.MinCleanableDirtyRatio, 0.9 }},
		{"log.cleaner.delete.retention.ms", nil, kv{"log.cleaner.delete.retention.ms": "5"},
			func(c Config) (any, any) { return c.DeleteRetentionMs, int64(5) }},
		{"log.cleaner.min.compaction.lag.ms", nil, kv{"log.cleaner.min.compaction.lag.ms": "7"},
			func(c Config) (any, any) { return c.MinCompactionLagMs, int64(7) }},
		{"log.cleaner.max.compaction.lag.ms", nil, kv{"log.cleaner.max.compaction.lag.ms": "8"},
			func(c Config) (any, any) { return c.MaxCompactionLagMs, int64(8) }},
		{"timestamps", kv{"message.timestamp.before.max.ms": "10"}, kv{"log.message.timestamp.after.max.ms": "20"},
			func(c Config) (any, any) {
				return [2]int64{c.MessageTimestampBeforeMaxMs, c.MessageTimestampAfterMaxMs}, [2]int64{10, 20}
			}},
		{"compression stored", kv{"compression.type": "zstd"}, nil,
			func(c Config) (any, any) { return c.CompressionType, "zstd" }},
		{"log.index.interval.bytes", nil, kv{"log.index.interval.bytes": "100"},
			func(c Config) (any, any) { return c.IndexIntervalBytes, int32(100) }},
		{"trimmed topic value", kv{"retention.ms": " 77 "}, nil,
			func(c Config) (any, any) { return c.RetentionMs, int64(77) }},
		{"unknown topic keys ignored", kv{"message.format.version": "2.8"}, nil,
			func(c Config) (any, any) { return c.RetentionMs, int64(604800000) }},
		{"unrelated broker keys ignored", nil, kv{"num.partitions": "12"},
			func(c Config) (any, any) { return c.RetentionMs, int64(604800000) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Resolve(c.topic, Broker{Overrides: c.broker})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := c.check(cfg); got != want {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	type kv = map[string]string
	cases := []struct {
		name          string
		topic, broker kv
		err           string
	}{
		{"bad topic value", kv{"retention.ms": "abc"}, nil,
			"Invalid value abc for configuration retention.ms: Not a number of type LONG"},
		{"bad broker value", nil, kv{"log.segment.bytes": "5"},
			"Invalid value 5 for configuration log.segment.bytes: Value must be at least 1048576"},
		{"broker value invalid for the topic key", nil, kv{"log.roll.ms": "0"},
			"Invalid value 0 for configuration segment.ms: Value must be at least 1"},
		{"tiered storage", kv{"remote.storage.enable": "true"}, nil,
			"Invalid value true for configuration remote.storage.enable: tiered storage is not supported by Regent"},
		{"lag conflict across topic and broker", kv{"min.compaction.lag.ms": "10"}, kv{"log.cleaner.max.compaction.lag.ms": "5"},
			"conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Resolve(c.topic, Broker{Overrides: c.broker})
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error\n got %v\nwant %q", err, c.err)
			}
		})
	}
}

// TestResolveKeepsZeros: Kafka honours 0 for these keys (retention.ms=0
// deletes everything older than now, and so on); resolving must not turn a
// 0 into the default, whether it comes from the topic or the broker.
func TestResolveKeepsZeros(t *testing.T) {
	zeros := map[string]string{
		"retention.ms": "0", "retention.bytes": "0", "delete.retention.ms": "0",
		"min.cleanable.dirty.ratio": "0", "index.interval.bytes": "0", "min.compaction.lag.ms": "0",
	}
	check := func(from string, c Config) {
		t.Helper()
		if c.RetentionMs != 0 || c.RetentionBytes != 0 || c.DeleteRetentionMs != 0 ||
			c.MinCleanableDirtyRatio != 0 || c.IndexIntervalBytes != 0 || c.MinCompactionLagMs != 0 {
			t.Fatalf("zeros from %s resolved to %+v", from, c)
		}
	}
	c, err := Resolve(zeros, Broker{})
	if err != nil {
		t.Fatal(err)
	}
	check("topic", c)
	c, err = Resolve(nil, Broker{Overrides: map[string]string{
		"log.retention.hours": "0", "log.retention.bytes": "0", "log.cleaner.delete.retention.ms": "0",
		"log.cleaner.min.cleanable.ratio": "0", "log.index.interval.bytes": "0", "log.cleaner.min.compaction.lag.ms": "0",
	}})
	if err != nil {
		t.Fatal(err)
	}
	check("broker", c)
}
