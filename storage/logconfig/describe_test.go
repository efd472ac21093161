package logconfig

import (
	"reflect"
	"testing"
)

func find(t *testing.T, es []Entry, name string) Entry {
	t.Helper()
	for _, e := range es {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no entry %s", name)
	return Entry{}
}

func TestDescribeTopicCoversEveryKey(t *testing.T) {
	es := DescribeTopic(nil, Broker{})
	defs := Topic()
	if len(es) != len(defs) {
		t.Fatalf("%d entries for %d defs", len(es), len(defs))
	}
	for i, e := range es {
		d := defs[i]
		if e.Name != d.Name || e.Type != d.Type || e.Doc != d.Doc || e.Null || e.ReadOnly || e.Sensitive {
			t.Errorf("entry %+v does not match def %s", e, d.Name)
		}
		if e.Value != d.Default || e.Source != SourceDefault {
			t.Errorf("%s: value %q source %v, want default %q", e.Name, e.Value, e.Source, d.Default)
		}
	}
}

func TestDescribeTopic(t *testing.T) {
	type kv = map[string]string
	cases := []struct {
		name          string
		topic, broker kv
		key           string
		value         string
		source        Source
		synonyms      []Synonym
	}{
		{"default with broker default synonym", nil, nil, "retention.ms", "604800000", SourceDefault,
			[]Synonym{{"log.retention.hours", "168", SourceDefault}}},
		{"no broker synonym", nil, nil, "remote.storage.enable", "false", SourceDefault, nil},
		{"topic value, normalized", kv{"cleanup.policy": "delete, compact"}, nil, "cleanup.policy", "delete,compact", SourceTopic,
			[]Synonym{{"cleanup.policy", "delete,compact", SourceTopic}, {"log.cleanup.policy", "delete", SourceDefault}}},
		{"inherited from broker override", nil, kv{"log.retention.hours": "1"}, "retention.ms", "3600000", SourceStaticBroker,
			[]Synonym{{"log.retention.hours", "1", SourceStaticBroker}, {"log.retention.hours", "168", SourceDefault}}},
		{"topic over broker", kv{"retention.ms": "1000"}, kv{"log.retention.hours": "1"}, "retention.ms", "1000", SourceTopic,
			[]Synonym{{"retention.ms", "1000", SourceTopic}, {"log.retention.hours", "1", SourceStaticBroker}, {"log.retention.hours", "168", SourceDefault}}},
		{"all broker synonyms in priority order", nil, kv{"log.roll.hours": "2", "log.roll.ms": "500"}, "segment.ms", "500", SourceStaticBroker,
			[]Synonym{{"log.roll.ms", "500", SourceStaticBroker}, {"log.roll.hours", "2", SourceStaticBroker}, {"log.roll.hours", "168", SourceDefault}}},
		{"same-name broker synonym", nil, kv{"min.insync.replicas": "2"}, "min.insync.replicas", "2", SourceStaticBroker,
			[]Synonym{{"min.insync.replicas", "2", SourceStaticBroker}, {"min.insync.replicas", "1", SourceDefault}}},
		{"double rendered like Java", kv{"min.cleanable.dirty.ratio": "1"}, nil, "min.cleanable.dirty.ratio", "1.0", SourceTopic,
			[]Synonym{{"min.cleanable.dirty.ratio", "1.0", SourceTopic}, {"log.cleaner.min.cleanable.ratio", "0.5", SourceDefault}}},
		{"boolean rendered lower case", kv{"preallocate": "TRUE"}, nil, "preallocate", "true", SourceTopic,
			[]Synonym{{"preallocate", "true", SourceTopic}, {"log.preallocate", "false", SourceDefault}}},
		{"invalid broker value skipped", nil, kv{"log.retention.ms": "x", "log.retention.hours": "2"}, "retention.ms", "7200000", SourceStaticBroker,
			[]Synonym{{"log.retention.hours", "2", SourceStaticBroker}, {"log.retention.hours", "168", SourceDefault}}},
		{"flush.ms falls back to scheduler interval", nil, nil, "flush.ms", "9223372036854775807", SourceDefault,
			[]Synonym{{"log.flush.scheduler.interval.ms", "9223372036854775807", SourceDefault}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := find(t, DescribeTopic(c.topic, Broker{Overrides: c.broker, Static: c.broker}), c.key)
			if e.Value != c.value || e.Source != c.source {
				t.Errorf("value %q source %v, want %q %v", e.Value, e.Source, c.value, c.source)
			}
			if !reflect.DeepEqual(e.Synonyms, c.synonyms) {
				t.Errorf("synonyms\n got %v\nwant %v", e.Synonyms, c.synonyms)
			}
		})
	}
}

// A value set at runtime is DYNAMIC_BROKER_CONFIG on a broker's resource
// and DYNAMIC_DEFAULT_BROKER_CONFIG on the default one and as a topic's
// synonym, before the start value it hides; only it is Dynamic.
func TestDescribeDynamicBroker(t *testing.T) {
	b := Broker{
		Overrides: map[string]string{"log.retention.ms": "1000", "num.partitions": "6", "log.segment.bytes": "2000000"},
		Static:    map[string]string{"log.retention.ms": "5000", "num.partitions": "6"},
	}
	e := find(t, DescribeBroker(b, true), "log.retention.ms")
	want := []Synonym{{"log.retention.ms", "1000", SourceDynamicBroker}, {"log.retention.ms", "5000", SourceStaticBroker}, {"log.retention.hours", "168", SourceDefault}}
	if e.Source != SourceDynamicBroker || !reflect.DeepEqual(e.Synonyms, want) {
		t.Errorf("per broker: source %v synonyms %v", e.Source, e.Synonyms)
	}
	if e := find(t, DescribeBroker(b, false), "log.retention.ms"); e.Source != SourceDynamicDefaultBroker {
		t.Errorf("default resource: source %v", e.Source)
	}
	if e := find(t, DescribeBroker(b, true), "num.partitions"); e.Source != SourceStaticBroker {
		t.Errorf("start value: source %v", e.Source)
	}
	if e := find(t, DescribeTopic(nil, b), "segment.bytes"); e.Source != SourceDynamicDefaultBroker {
		t.Errorf("topic synonym: source %v", e.Source)
	}
	if d := b.Dynamic(); !reflect.DeepEqual(d, map[string]string{"log.retention.ms": "1000", "log.segment.bytes": "2000000"}) {
		t.Errorf("Dynamic: %v", d)
	}
}

func TestDescribeBroker(t *testing.T) {
	type kv = map[string]string
	cases := []struct {
		name     string
		broker   kv
		key      string
		value    string
		null     bool
		source   Source
		readOnly bool
		synonyms []Synonym
	}{
		{"default", nil, "log.retention.hours", "168", false, SourceDefault, true,
			[]Synonym{{"log.retention.hours", "168", SourceDefault}}},
		{"null default", nil, "log.retention.ms", "", true, SourceDefault, false, nil},
		{"override", kv{"log.retention.hours": "1"}, "log.retention.hours", "1", false, SourceStaticBroker, true,
			[]Synonym{{"log.retention.hours", "1", SourceStaticBroker}, {"log.retention.hours", "168", SourceDefault}}},
		{"lower-priority synonym does not fill a higher one", kv{"log.retention.hours": "1"}, "log.retention.ms", "", true, SourceDefault, false, nil},
		{"higher-priority synonyms dropped", kv{"log.retention.ms": "1000"}, "log.retention.hours", "168", false, SourceDefault, true,
			[]Synonym{{"log.retention.hours", "168", SourceDefault}}},
		{"ms override", kv{"log.retention.ms": "1000"}, "log.retention.ms", "1000", false, SourceStaticBroker, false,
			[]Synonym{{"log.retention.ms", "1000", SourceStaticBroker}, {"log.retention.hours", "168", SourceDefault}}},
		{"list normalized", kv{"log.cleanup.policy": "compact , delete"}, "log.cleanup.policy", "compact,delete", false, SourceStaticBroker, false,
			[]Synonym{{"log.cleanup.policy", "compact,delete", SourceStaticBroker}, {"log.cleanup.policy", "delete", SourceDefault}}},
		{"read-only cluster key", kv{"num.partitions": "6"}, "num.partitions", "6", false, SourceStaticBroker, true,
			[]Synonym{{"num.partitions", "6", SourceStaticBroker}, {"num.partitions", "1", SourceDefault}}},
		{"broker.id from node.id", kv{"node.id": "3"}, "broker.id", "3", false, SourceStaticBroker, true,
			[]Synonym{{"node.id", "3", SourceStaticBroker}}},
		{"invalid override ignored", kv{"log.segment.bytes": "1"}, "log.segment.bytes", "1073741824", false, SourceDefault, false,
			[]Synonym{{"log.segment.bytes", "1073741824", SourceDefault}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Values given at start: static.
			e := find(t, DescribeBroker(Broker{Overrides: c.broker, Static: c.broker}, true), c.key)
			if e.Value != c.value || e.Null != c.null || e.Source != c.source || e.ReadOnly != c.readOnly {
				t.Errorf("got value %q null %v source %v readOnly %v", e.Value, e.Null, e.Source, e.ReadOnly)
			}
			if !reflect.DeepEqual(e.Synonyms, c.synonyms) {
				t.Errorf("synonyms\n got %v\nwant %v", e.Synonyms, c.synonyms)
			}
		})
	}
	es := DescribeBroker(Broker{}, false)
	if len(es) != len(Broker{}.Defs()) {
		t.Fatalf("%d entries for %d defs", len(es), len(Broker{}.Defs()))
	}
	if e := find(t, es, "offsets.topic.replication.factor"); e.Type != TypeShort || e.Value != "3" {
		t.Errorf("offsets.topic.replication.factor: %+v", e)
	}
}
