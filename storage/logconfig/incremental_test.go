package logconfig

import (
	"errors"
	"reflect"
	"testing"
)

func TestIncremental(t *testing.T) {
	type kv = map[string]string
	set := func(k, v string) Op { return Op{Key: k, Value: sp(v), Op: OpSet} }
	del := func(k string) Op { return Op{Key: k, Op: OpDelete} }
	app := func(k, v string) Op { return Op{Key: k, Value: sp(v), Op: OpAppend} }
	sub := func(k, v string) Op { return Op{Key: k, Value: sp(v), Op: OpSubtract} }
	cases := []struct {
		name       string
		current    kv
		ops        []Op
		want       kv
		err        string
		badRequest bool
	}{
		{"append to default", nil, []Op{app("cleanup.policy", "compact")}, kv{"cleanup.policy": "delete,compact"}, "", false},
		{"append already present", kv{"cleanup.policy": "compact"}, []Op{app("cleanup.policy", "compact")}, kv{"cleanup.policy": "compact"}, "", false},
		{"append several", kv{"cleanup.policy": "delete"}, []Op{app("cleanup.policy", "compact,delete")}, kv{"cleanup.policy": "delete,compact"}, "", false},
		{"append to spaced value", kv{"cleanup.policy": "delete"}, []Op{app("cleanup.policy", " compact")}, kv{"cleanup.policy": "delete,compact"}, "", false},
		{"append to empty list", kv{"cleanup.policy": ""}, []Op{app("cleanup.policy", "compact")}, kv{"cleanup.policy": "compact"}, "", false},
		{"subtract from default", nil, []Op{sub("cleanup.policy", "delete")}, kv{"cleanup.policy": ""}, "", false},
		{"subtract one", kv{"cleanup.policy": "delete,compact"}, []Op{sub("cleanup.policy", "compact")}, kv{"cleanup.policy": "delete"}, "", false},
		{"subtract absent", kv{"cleanup.policy": "delete"}, []Op{sub("cleanup.policy", "compact")}, kv{"cleanup.policy": "delete"}, "", false},
		{"append throttled replicas", nil, []Op{app("leader.replication.throttled.replicas", "0:1")}, kv{"leader.replication.throttled.replicas": "0:1"}, "", false},
		{"append invalid item", nil, []Op{app("cleanup.policy", "foo")}, nil,
			"Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete", false},
		{"append to non-list", nil, []Op{app("retention.ms", "5")}, nil,
			"Can't APPEND to key retention.ms because its type is not LIST.", false},
		{"subtract from non-list", nil, []Op{sub("compression.type", "gzip")}, nil,
			"Can't SUBTRACT to key compression.type because its type is not LIST.", false},
		{"append to unknown", nil, []Op{app("foo", "x")}, nil,
			"Can't APPEND to key foo because its type is not LIST.", false},
		{"set and delete", kv{"segment.ms": "1000", "retention.bytes": "5"}, []Op{set("retention.ms", "1000"), del("segment.ms")},
			kv{"retention.ms": "1000", "retention.bytes": "5"}, "", false},
		{"delete unset key", nil, []Op{del("retention.ms")}, kv{}, "", false},
		{"delete unknown key", kv{"retention.ms": "1"}, []Op{del("foo")}, kv{"retention.ms": "1"}, "", false},
		{"set bad value", nil, []Op{set("retention.ms", "abc")}, nil,
			"Invalid value abc for configuration retention.ms: Not a number of type LONG", false},
		{"set unknown", nil, []Op{set("foo", "1")}, nil, "Unknown topic config name: foo", false},
		{"set tiered storage", nil, []Op{set("remote.storage.enable", "true")}, nil,
			"Invalid value true for configuration remote.storage.enable: tiered storage is not supported by Regent", false},
		{"result validated as a whole", kv{"max.compaction.lag.ms": "5"}, []Op{set("min.compaction.lag.ms", "10")}, nil,
			"conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)", false},
		{"null set", nil, []Op{{Key: "retention.ms", Op: OpSet}}, nil, "Null value not supported for : retention.ms", true},
		{"null append", nil, []Op{{Key: "cleanup.policy", Op: OpAppend}}, nil, "Null value not supported for : cleanup.policy", true},
		{"duplicate keys", nil, []Op{set("retention.ms", "1"), del("retention.ms")}, nil, "Error due to duplicate config keys", true},
		{"unknown op", nil, []Op{{Key: "retention.ms", Value: sp("1"), Op: 7}}, nil, "Unknown alter config operation 7 for retention.ms", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before kv
			if c.current != nil {
				before = kv{}
				for k, v := range c.current {
					before[k] = v
				}
			}
			got, err := Incremental(c.current, c.ops)
			if !reflect.DeepEqual(c.current, before) {
				t.Fatalf("current modified: %v", c.current)
			}
			if c.err != "" {
				var ce *ConfigError
				if err == nil || err.Error() != c.err || !errors.As(err, &ce) {
					t.Fatalf("error\n got %v\nwant %q", err, c.err)
				}
				if ce.InvalidRequest() != c.badRequest {
					t.Fatalf("InvalidRequest() = %v", ce.InvalidRequest())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}
