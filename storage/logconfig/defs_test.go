package logconfig

import (
	"sort"
	"strings"
	"testing"
)

// Every topic config a Kafka 4.x broker accepts (4.4 added remote.copy.lag.*).
var kafka4TopicKeys = []string{
	"cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
	"compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
	"flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
	"leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
	"max.compaction.lag.ms", "max.message.bytes", "message.timestamp.after.max.ms",
	"message.timestamp.before.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
	"min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.copy.lag.bytes",
	"remote.copy.lag.ms", "remote.log.copy.disable", "remote.log.delete.on.disable",
	"remote.storage.enable", "retention.bytes", "retention.ms", "segment.bytes",
	"segment.index.bytes", "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable",
}

var enforcedTopicKeys = map[string]bool{
	"cleanup.policy": true, "retention.ms": true, "retention.bytes": true, "segment.bytes": true,
	"segment.ms": true, "max.message.bytes": true, "min.insync.replicas": true,
	"message.timestamp.type": true, "delete.retention.ms": true, "min.compaction.lag.ms": true,
	"max.compaction.lag.ms": true, "min.cleanable.dirty.ratio": true, "index.interval.bytes": true,
	"message.timestamp.before.max.ms": true, "message.timestamp.after.max.ms": true,
}

func TestTopicKeysMatchKafka4(t *testing.T) {
	defs := Topic()
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
	}
	if !sort.StringsAreSorted(names) {
		t.Fatalf("Topic() not sorted: %v", names)
	}
	if strings.Join(names, " ") != strings.Join(kafka4TopicKeys, " ") {
		t.Fatalf("topic keys differ from Kafka 4.x:\n got %v\nwant %v", names, kafka4TopicKeys)
	}
	for _, gone := range []string{"message.format.version", "message.timestamp.difference.max.ms",
		"message.downconversion.enable", "internal.segment.bytes", "compaction.strategy"} {
		if _, ok := LookupTopic(gone); ok {
			t.Errorf("%s should not be a Kafka 4.x topic config", gone)
		}
	}
}

func TestTopicDefs(t *testing.T) {
	for _, d := range Topic() {
		t.Run(d.Name, func(t *testing.T) {
			if d.Doc == "" {
				t.Error("no Doc")
			}
			if d.Enforced != enforcedTopicKeys[d.Name] {
				t.Errorf("Enforced = %v, want %v", d.Enforced, enforcedTopicKeys[d.Name])
			}
			if !d.Enforced && !strings.Contains(d.Doc, "Regent does not") {
				t.Errorf("unenforced key's Doc must say so: %q", d.Doc)
			}
			if !d.HasDefault {
				t.Error("every Kafka topic config has a non-null default")
			}
			if err := d.ValidateValue(d.Default); err != nil {
				t.Errorf("default %q does not validate: %v", d.Default, err)
			}
			if d.Type == TypeUnknown || d.Sensitive || d.ReadOnly {
				t.Errorf("type %v sensitive %v readOnly %v", d.Type, d.Sensitive, d.ReadOnly)
			}
			if got, ok := LookupTopic(d.Name); !ok || got.Name != d.Name {
				t.Error("LookupTopic failed")
			}
			if len(d.synonyms) > 0 && d.BrokerName != d.synonyms[0].name {
				t.Errorf("BrokerName %q, first synonym %q", d.BrokerName, d.synonyms[0].name)
			}
			for _, s := range d.synonyms {
				bd, ok := LookupBroker(s.name)
				if !ok {
					t.Errorf("synonym %s is not a broker def", s.name)
					continue
				}
				if s.conv == convNone && bd.Type != d.Type {
					t.Errorf("synonym %s type %v, topic type %v", s.name, bd.Type, d.Type)
				}
				if s.conv == convNone && bd.HasDefault && bd.Default != d.Default {
					t.Errorf("synonym %s default %q, topic default %q", s.name, bd.Default, d.Default)
				}
			}
		})
	}
}

func TestBrokerTopicDefaultsAgreeAfterConversion(t *testing.T) {
	// Kafka's topic defaults equal what the broker defaults resolve to.
	got, err := Resolve(nil, Broker{})
	if err != nil {
		t.Fatal(err)
	}
	hours := Broker{Overrides: map[string]string{"log.retention.hours": "168", "log.roll.hours": "168"}}
	got2, err := Resolve(nil, hours)
	if err != nil {
		t.Fatal(err)
	}
	if got != got2 {
		t.Fatalf("defaults %+v != explicit broker defaults %+v", got, got2)
	}
}

func TestBrokerDefs(t *testing.T) {
	defs := Broker{}.Defs()
	if !sort.SliceIsSorted(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name }) {
		t.Fatal("Defs() not sorted")
	}
	must := []string{"num.partitions", "default.replication.factor", "auto.create.topics.enable",
		"message.max.bytes", "min.insync.replicas", "offsets.topic.replication.factor",
		"transaction.state.log.replication.factor", "transaction.state.log.min.isr",
		"log.retention.hours", "log.retention.ms", "log.retention.minutes", "log.segment.bytes",
		"log.cleanup.policy", "broker.id", "node.id", "transaction.max.timeout.ms",
		"group.initial.rebalance.delay.ms", "group.min.session.timeout.ms",
		"group.max.session.timeout.ms", "log.message.timestamp.type", "compression.type",
		"producer.id.expiration.ms", "transactional.id.expiration.ms"}
	for _, n := range must {
		if _, ok := LookupBroker(n); !ok {
			t.Errorf("missing broker def %s", n)
		}
	}
	readOnly := map[string]bool{"broker.id": true, "node.id": true, "num.partitions": true,
		"log.retention.hours": true, "log.retention.minutes": true, "log.roll.hours": true,
		"default.replication.factor": true, "auto.create.topics.enable": true}
	dynamic := map[string]bool{"log.retention.ms": true, "log.segment.bytes": true,
		"message.max.bytes": true, "min.insync.replicas": true, "log.cleanup.policy": true,
		"compression.type": true, "log.roll.ms": true, "producer.id.expiration.ms": true}
	for _, d := range defs {
		t.Run(d.Name, func(t *testing.T) {
			if d.Doc == "" {
				t.Error("no Doc")
			}
			if !d.Enforced && !strings.Contains(d.Doc, "Regent does not") {
				t.Errorf("unenforced key's Doc must say so: %q", d.Doc)
			}
			if d.HasDefault {
				if err := d.ValidateValue(d.Default); err != nil {
					t.Errorf("default %q does not validate: %v", d.Default, err)
				}
			} else if d.Default != "" {
				t.Errorf("null default with Default %q", d.Default)
			}
			if readOnly[d.Name] && !d.ReadOnly {
				t.Error("should be read-only")
			}
			if dynamic[d.Name] && d.ReadOnly {
				t.Error("should be dynamic")
			}
			if d.BrokerName != "" {
				t.Error("broker defs have no BrokerName")
			}
			if len(d.group) == 0 || !contains(d.group, d.Name) {
				t.Errorf("group %v must contain the key", d.group)
			}
		})
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func TestJavaDouble(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want string
	}{
		{0.5, "0.5"}, {1, "1.0"}, {0, "0.0"}, {123456.789, "123456.789"},
		{1e7, "1.0E7"}, {1e-4, "1.0E-4"}, {1.5e-10, "1.5E-10"}, {0.001, "0.001"}, {-2.5e8, "-2.5E8"},
	} {
		if got := javaDouble(c.in); got != c.want {
			t.Errorf("javaDouble(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestTypeAndSourceCodes(t *testing.T) {
	// DescribeConfigs wire values.
	if TypeBoolean != 1 || TypeString != 2 || TypeInt != 3 || TypeShort != 4 || TypeLong != 5 ||
		TypeDouble != 6 || TypeList != 7 || TypeClass != 8 || TypePassword != 9 {
		t.Error("Type codes do not match Kafka")
	}
	if SourceTopic != 1 || SourceDynamicBroker != 2 || SourceDynamicDefaultBroker != 3 ||
		SourceStaticBroker != 4 || SourceDefault != 5 {
		t.Error("Source codes do not match Kafka")
	}
	if TypeLong.String() != "LONG" || SourceStaticBroker.String() != "STATIC_BROKER_CONFIG" {
		t.Error("String()")
	}
}
