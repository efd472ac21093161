package logconfig

import (
	"strconv"
	"strings"
)

// Config is the resolved, typed set of per-topic settings Regent enforces
// (plus compression.type, which is stored only).
type Config struct {
	CleanupDelete, CleanupCompact bool

	RetentionMs, RetentionBytes int64
	SegmentBytes, SegmentMs     int64
	DeleteRetentionMs           int64
	MinCompactionLagMs          int64
	MaxCompactionLagMs          int64
	MinCleanableDirtyRatio      float64
	MaxMessageBytes             int32
	MinInsyncReplicas           int32
	LogAppendTime               bool // message.timestamp.type=LogAppendTime
	MessageTimestampBeforeMaxMs int64
	MessageTimestampAfterMaxMs  int64
	CompressionType             string // stored only: Regent keeps batches as produced
	IndexIntervalBytes          int32
	// ProducerIDExpirationMs is the broker's producer.id.expiration.ms
	// (Kafka has no topic key for it): how long an idle producer's state
	// is kept on a partition.
	ProducerIDExpirationMs int64
}

// DefaultProducerIDExpirationMs is Kafka's producer.id.expiration.ms: a day.
const DefaultProducerIDExpirationMs = 86_400_000

// Resolve computes a topic's effective settings. For every key the topic
// value wins; otherwise the first broker synonym present in
// broker.Overrides, converted as Kafka converts it (log.retention.ms over
// log.retention.minutes over log.retention.hours; log.roll.ms over
// log.roll.hours; a negative broker retention means -1); otherwise Kafka's
// default. Invalid topic or broker values, the compaction-lag conflict and
// remote.storage.enable=true are errors (*ConfigError). Unknown topic keys
// are ignored, as a Kafka broker ignores them when loading a log.
func Resolve(topic map[string]string, broker Broker) (Config, error) {
	vals := make(map[string]string, len(topicDefs))
	for i := range topicDefs {
		v, _, err := resolveOne(&topicDefs[i], topic, broker, true)
		if err != nil {
			return Config{}, err
		}
		vals[topicDefs[i].Name] = v
	}
	long := func(k string) int64 {
		v, _ := parseIntegral(TypeLong, vals[k])
		return v
	}
	int32v := func(k string) int32 { return int32(long(k)) }
	c := Config{
		RetentionMs:                 long("retention.ms"),
		RetentionBytes:              long("retention.bytes"),
		SegmentBytes:                long("segment.bytes"),
		SegmentMs:                   long("segment.ms"),
		DeleteRetentionMs:           long("delete.retention.ms"),
		MinCompactionLagMs:          long("min.compaction.lag.ms"),
		MaxCompactionLagMs:          long("max.compaction.lag.ms"),
		MaxMessageBytes:             int32v("max.message.bytes"),
		MinInsyncReplicas:           int32v("min.insync.replicas"),
		LogAppendTime:               vals["message.timestamp.type"] == "LogAppendTime",
		MessageTimestampBeforeMaxMs: long("message.timestamp.before.max.ms"),
		MessageTimestampAfterMaxMs:  long("message.timestamp.after.max.ms"),
		CompressionType:             vals["compression.type"],
		IndexIntervalBytes:          int32v("index.interval.bytes"),
		ProducerIDExpirationMs:      DefaultProducerIDExpirationMs,
	}
	if raw, ok := broker.get("producer.id.expiration.ms"); ok {
		if v, ok := parseIntegral(TypeInt, raw); ok && v >= 1 {
			c.ProducerIDExpirationMs = v
		}
	}
	c.MinCleanableDirtyRatio, _ = parseDouble(vals["min.cleanable.dirty.ratio"])
	for _, p := range parseList(vals["cleanup.policy"]) {
		switch strings.ToLower(p) {
		case "delete":
			c.CleanupDelete = true
		case "compact":
			c.CleanupCompact = true
		}
	}
	if err := compactionLagConflict(c.MinCompactionLagMs, c.MaxCompactionLagMs); err != nil {
		return Config{}, err
	}
	return c, nil
}

// resolveOne returns the effective value of d (rendered as Kafka renders
// it) and where it came from. When strict is false, invalid values are
// skipped instead of reported.
func resolveOne(d *Def, topic map[string]string, broker Broker, strict bool) (string, Source, error) {
	if raw, ok := topic[d.Name]; ok {
		err := d.validate(raw)
		if err == nil {
			v, _ := normalize(d.Type, raw)
			return v, SourceTopic, nil
		}
		if strict {
			return "", 0, err
		}
	}
	for _, s := range d.synonyms {
		raw, ok := broker.get(s.name)
		if !ok {
			continue
		}
		v, err := fromBroker(d, s, raw)
		if err == nil {
			return v, SourceStaticBroker, nil
		}
		if strict {
			return "", 0, err
		}
	}
	return d.Default, SourceDefault, nil
}

// fromBroker converts a broker synonym's value into the topic key's value
// and checks it against both the broker and the topic validators.
func fromBroker(d *Def, s synonym, raw string) (string, error) {
	bd, ok := LookupBroker(s.name)
	if !ok {
		return "", sentence(s.name, "Unknown broker config name", "Unknown broker config name: "+s.name)
	}
	if err := bd.validate(raw); err != nil {
		return "", err
	}
	v, _ := normalize(bd.Type, raw)
	if s.conv != convNone || d.Name == "retention.ms" {
		n, _ := parseIntegral(TypeLong, raw)
		switch s.conv {
		case convHoursToMs:
			n *= 3600 * 1000
		case convMinutesToMs:
			n *= 60 * 1000
		}
		if d.Name == "retention.ms" && n < 0 {
			n = -1 // Kafka: any negative broker retention means unlimited
		}
		v = strconv.FormatInt(n, 10)
	}
	if err := d.validate(v); err != nil {
		return "", err
	}
	return v, nil
}
