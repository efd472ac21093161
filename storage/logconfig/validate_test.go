package logconfig

import (
	"errors"
	"testing"
)

func sp(s string) *string { return &s }

func TestValidateValues(t *testing.T) {
	cases := []struct {
		key, value, err string // err "" means valid
	}{
		// LONG
		{"retention.ms", "abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"},
		{"retention.ms", "-1", ""},
		{"retention.ms", " 100 ", ""},
		{"retention.ms", "+100", ""},
		{"retention.ms", "1.5", "Invalid value 1.5 for configuration retention.ms: Not a number of type LONG"},
		{"retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"},
		{"retention.ms", "9223372036854775808", "Invalid value 9223372036854775808 for configuration retention.ms: Not a number of type LONG"},
		{"retention.bytes", "-5", ""},
		{"segment.ms", "0", "Invalid value 0 for configuration segment.ms: Value must be at least 1"},
		{"delete.retention.ms", "-1", "Invalid value -1 for configuration delete.retention.ms: Value must be at least 0"},
		{"max.compaction.lag.ms", "0", "Invalid value 0 for configuration max.compaction.lag.ms: Value must be at least 1"},
		{"flush.messages", "0", "Invalid value 0 for configuration flush.messages: Value must be at least 1"},
		{"flush.ms", "0", ""},
		{"local.retention.ms", "-2", ""},
		{"local.retention.bytes", "-3", "Invalid value -3 for configuration local.retention.bytes: Value must be at least -2"},
		{"remote.copy.lag.ms", "-1", ""},
		{"remote.copy.lag.bytes", "-2", "Invalid value -2 for configuration remote.copy.lag.bytes: Value must be at least -1"},
		{"message.timestamp.before.max.ms", "-1", "Invalid value -1 for configuration message.timestamp.before.max.ms: Value must be at least 0"},
		{"message.timestamp.after.max.ms", "3600000", ""},
		// INT
		{"segment.bytes", "1048575", "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576"},
		{"segment.bytes", "1048576", ""},
		{"segment.bytes", "2147483648", "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"},
		{"segment.index.bytes", "3", "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4"},
		{"max.message.bytes", "-1", "Invalid value -1 for configuration max.message.bytes: Value must be at least 0"},
		{"index.interval.bytes", "0", ""},
		{"min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"},
		{"min.insync.replicas", "2", ""},
		{"compression.gzip.level", "-1", ""},
		{"compression.gzip.level", "9", ""},
		{"compression.gzip.level", "0", "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"},
		{"compression.gzip.level", "10", "Invalid value 10 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"},
		{"compression.lz4.level", "0", "Invalid value 0 for configuration compression.lz4.level: Value must be at least 1"},
		{"compression.lz4.level", "18", "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17"},
		{"compression.zstd.level", "-131072", ""},
		{"compression.zstd.level", "23", "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"},
		// DOUBLE
		{"min.cleanable.dirty.ratio", "0", ""},
		{"min.cleanable.dirty.ratio", "1", ""},
		{"min.cleanable.dirty.ratio", "0.25", ""},
		{"min.cleanable.dirty.ratio", "5e-1", ""},
		{"min.cleanable.dirty.ratio", "1.5", "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"},
		{"min.cleanable.dirty.ratio", "2", "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"},
		{"min.cleanable.dirty.ratio", "-0.1", "Invalid value -0.1 for configuration min.cleanable.dirty.ratio: Value must be at least 0"},
		{"min.cleanable.dirty.ratio", "half", "Invalid value half for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"},
		{"min.cleanable.dirty.ratio", "NaN", "Invalid value NaN for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"},
		{"min.cleanable.dirty.ratio", "inf", "Invalid value inf for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"},
		// BOOLEAN
		{"preallocate", "TRUE", ""},
		{"preallocate", " False ", ""},
		{"preallocate", "yes", "Invalid value yes for configuration preallocate: Expected value to be either true or false"},
		{"unclean.leader.election.enable", "1", "Invalid value 1 for configuration unclean.leader.election.enable: Expected value to be either true or false"},
		{"remote.log.copy.disable", "true", ""},
		{"remote.storage.enable", "false", ""},
		{"remote.storage.enable", "TRUE", "Invalid value true for configuration remote.storage.enable: tiered storage is not supported by Regent"},
		{"remote.storage.enable", "maybe", "Invalid value maybe for configuration remote.storage.enable: Expected value to be either true or false"},
		// STRING
		{"message.timestamp.type", "LogAppendTime", ""},
		{"message.timestamp.type", " CreateTime ", ""},
		{"message.timestamp.type", "logappendtime", "Invalid value logappendtime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"},
		{"compression.type", "uncompressed", ""},
		{"compression.type", "zstd", ""},
		{"compression.type", "lz4", ""},
		{"compression.type", "snappy", ""},
		{"compression.type", "gzip", ""},
		{"compression.type", "producer", ""},
		{"compression.type", "none", "Invalid value none for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"},
		{"compression.type", "GZIP", "Invalid value GZIP for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"},
		// LIST
		{"cleanup.policy", "compact", ""},
		{"cleanup.policy", "compact,delete", ""},
		{"cleanup.policy", "delete , compact", ""},
		{"cleanup.policy", "", ""},
		{"cleanup.policy", "  ", ""},
		{"cleanup.policy", "foo", "Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete"},
		{"cleanup.policy", "Delete", "Invalid value Delete for configuration cleanup.policy: String must be one of: compact, delete"},
		{"cleanup.policy", "delete,delete", "Configuration 'cleanup.policy' values must not be duplicated."},
		{"cleanup.policy", "delete,", "Configuration 'cleanup.policy' values must not be empty."},
		{"leader.replication.throttled.replicas", "*", ""},
		{"leader.replication.throttled.replicas", "0:1, 1:2", ""},
		{"leader.replication.throttled.replicas", "", ""},
		{"follower.replication.throttled.replicas", "foo", "Invalid value [foo] for configuration follower.replication.throttled.replicas: follower.replication.throttled.replicas must be the literal '*' or a list of replicas in the form [partitionId]:[brokerId],[partitionId]:[brokerId],..."},
		{"leader.replication.throttled.replicas", "0:1,*", "Invalid value [0:1, *] for configuration leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the form [partitionId]:[brokerId],[partitionId]:[brokerId],..."},
	}
	for _, c := range cases {
		t.Run(c.key+"="+c.value, func(t *testing.T) {
			err := Validate(map[string]*string{c.key: sp(c.value)})
			if c.err == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want error %q", c.err)
			}
			if err.Error() != c.err {
				t.Fatalf("error\n got %q\nwant %q", err.Error(), c.err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != c.key || ce.InvalidRequest() {
				t.Fatalf("want *ConfigError for %s (INVALID_CONFIG), got %#v", c.key, err)
			}
		})
	}
}

func TestValidateMaps(t *testing.T) {
	cases := []struct {
		name    string
		configs map[string]*string
		err     string
	}{
		{"empty", nil, ""},
		{"several good", map[string]*string{"retention.ms": sp("1000"), "cleanup.policy": sp("compact")}, ""},
		{"unknown", map[string]*string{"foo": sp("1")}, "Unknown topic config name: foo"},
		{"removed in 4.0", map[string]*string{"message.format.version": sp("3.0")}, "Unknown topic config name: message.format.version"},
		{"removed in 4.0 (KIP-937)", map[string]*string{"message.timestamp.difference.max.ms": sp("1")}, "Unknown topic config name: message.timestamp.difference.max.ms"},
		{"no-op in 4.0", map[string]*string{"message.downconversion.enable": sp("true")}, "Unknown topic config name: message.downconversion.enable"},
		{"broker name is not a topic name", map[string]*string{"log.retention.ms": sp("1")}, "Unknown topic config name: log.retention.ms"},
		{"unknown before bad value", map[string]*string{"retention.ms": sp("x"), "zzz": sp("1")}, "Unknown topic config name: zzz"},
		{"first bad value by name", map[string]*string{"segment.ms": sp("0"), "retention.ms": sp("x")},
			"Invalid value x for configuration retention.ms: Not a number of type LONG"},
		{"nulls", map[string]*string{"segment.ms": nil, "segment.bytes": nil, "retention.ms": sp("1")},
			"Null value not supported for topic configs: segment.bytes,segment.ms"},
		{"null before unknown", map[string]*string{"foo": sp("1"), "retention.ms": nil},
			"Null value not supported for topic configs: retention.ms"},
		{"compaction lag conflict", map[string]*string{"min.compaction.lag.ms": sp("10"), "max.compaction.lag.ms": sp("5")},
			"conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"},
		{"compaction lag equal", map[string]*string{"min.compaction.lag.ms": sp("5"), "max.compaction.lag.ms": sp("5")}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.configs)
			if c.err == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || err.Error() != c.err {
				t.Fatalf("error\n got %v\nwant %q", err, c.err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("not a *ConfigError: %T", err)
			}
		})
	}
}

func TestValidateBroker(t *testing.T) {
	cases := []struct {
		name       string
		configs    map[string]*string
		err        string
		badRequest bool
	}{
		{"dynamic log default", map[string]*string{"log.retention.ms": sp("1000"), "log.cleanup.policy": sp("compact")}, "", false},
		// librdkafka's admin test alters this one on a broker; stored, not enforced.
		{"kerberos login setting", map[string]*string{"sasl.kerberos.min.time.before.relogin": sp("58000")}, "", false},
		{"kerberos type error", map[string]*string{"sasl.kerberos.ticket.renew.jitter": sp("x")},
			"Invalid value x for configuration sasl.kerberos.ticket.renew.jitter: Not a number of type DOUBLE", false},
		{"dynamic with bad value", map[string]*string{"log.segment.bytes": sp("100")},
			"Invalid value 100 for configuration log.segment.bytes: Value must be at least 1048576", false},
		{"dynamic type error", map[string]*string{"min.insync.replicas": sp("two")},
			"Invalid value two for configuration min.insync.replicas: Not a number of type INT", false},
		{"read-only", map[string]*string{"log.retention.hours": sp("1")},
			"Cannot update these configs dynamically: Set(log.retention.hours)", false},
		{"read-only several", map[string]*string{"num.partitions": sp("3"), "log.retention.hours": sp("1"), "log.retention.ms": sp("1")},
			"Cannot update these configs dynamically: Set(log.retention.hours, num.partitions)", false},
		{"unknown", map[string]*string{"bogus.key": sp("1")}, "Unknown broker config name: bogus.key", false},
		{"topic name is not a broker name", map[string]*string{"retention.ms": sp("1")}, "Unknown broker config name: retention.ms", false},
		{"null", map[string]*string{"log.retention.ms": nil}, "Null value not supported for : log.retention.ms", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateBroker(c.configs)
			if c.err == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var ce *ConfigError
			if err == nil || err.Error() != c.err || !errors.As(err, &ce) {
				t.Fatalf("error\n got %v\nwant %q", err, c.err)
			}
			if ce.InvalidRequest() != c.badRequest {
				t.Fatalf("InvalidRequest() = %v", ce.InvalidRequest())
			}
		})
	}
}
