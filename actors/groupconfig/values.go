package groupconfig

import (
	"sort"
	"strconv"
	"strings"
	"time"
)

// Values is a group's configs in force: its overrides over the broker's
// defaults (each key's BrokerKey, else Kafka's default).
type Values struct {
	ConsumerSessionTimeout     time.Duration
	ConsumerHeartbeatInterval  time.Duration
	ConsumerAssignmentInterval time.Duration

	ShareSessionTimeout          time.Duration
	ShareHeartbeatInterval       time.Duration
	ShareRecordLockDuration      time.Duration
	ShareDeliveryCountLimit      int
	SharePartitionMaxRecordLocks int
	// ShareAutoOffsetReset is latest, earliest or by_duration:<ISO-8601>;
	// ShareAutoOffsetResetBy is that duration (0 otherwise).
	ShareAutoOffsetReset        string
	ShareAutoOffsetResetBy      time.Duration
	ShareIsolationLevel         string // read_committed or read_uncommitted
	ShareRenewAcknowledgeEnable bool
	ShareAssignmentInterval     time.Duration

	StreamsSessionTimeout        time.Duration
	StreamsHeartbeatInterval     time.Duration
	StreamsNumStandbyReplicas    int
	StreamsInitialRebalanceDelay time.Duration
	StreamsAssignmentInterval    time.Duration
}

// inForce is the value of d for a group with overrides under broker: the
// override, else the broker's BrokerKey (when valid), else Kafka's
// default. set says which of the three it came from.
func inForce(d Def, overrides, broker map[string]string) (value string, src Source) {
	if v, ok := overrides[d.Name]; ok {
		if n, err := d.parse(v); err == nil {
			return n, SourceGroup
		}
	}
	if d.BrokerKey != "" {
		if v, ok := broker[d.BrokerKey]; ok {
			if n, err := d.parse(v); err == nil {
				return n, SourceStaticBroker
			}
		}
	}
	return d.Default, SourceDefault
}

// Source is where a value in force comes from, numbered as Kafka's
// DescribeConfigs config sources.
type Source int8

const (
	SourceStaticBroker Source = 4 // STATIC_BROKER_CONFIG
	SourceDefault      Source = 5 // DEFAULT_CONFIG
	SourceGroup        Source = 8 // GROUP_CONFIG
)

// Resolve returns the values in force for a group with overrides under
// the broker config broker. Overrides are checked before they are stored,
// so every value parses; a key that does not falls back as if unset.
func Resolve(overrides, broker map[string]string) Values {
	all := make(map[string]string, len(Defs))
	for _, d := range Defs {
		all[d.Name], _ = inForce(d, overrides, broker)
	}
	ms := func(k string) time.Duration {
		n, _ := strconv.ParseInt(all[k], 10, 64)
		return time.Duration(n) * time.Millisecond
	}
	num := func(k string) int {
		n, _ := strconv.Atoi(all[k])
		return n
	}
	v := Values{
		ConsumerSessionTimeout:       ms(ConsumerSessionTimeoutMs),
		ConsumerHeartbeatInterval:    ms(ConsumerHeartbeatIntervalMs),
		ConsumerAssignmentInterval:   ms(ConsumerAssignmentIntervalMs),
		ShareSessionTimeout:          ms(ShareSessionTimeoutMs),
		ShareHeartbeatInterval:       ms(ShareHeartbeatIntervalMs),
		ShareRecordLockDuration:      ms(ShareRecordLockDurationMs),
		ShareDeliveryCountLimit:      num(ShareDeliveryCountLimit),
		SharePartitionMaxRecordLocks: num(SharePartitionMaxRecordLocks),
		ShareAutoOffsetReset:         strings.ToLower(all[ShareAutoOffsetReset]),
		ShareIsolationLevel:          all[ShareIsolationLevel],
		ShareRenewAcknowledgeEnable:  all[ShareRenewAcknowledgeEnable] == "true",
		ShareAssignmentInterval:      ms(ShareAssignmentIntervalMs),
		StreamsSessionTimeout:        ms(StreamsSessionTimeoutMs),
		StreamsHeartbeatInterval:     ms(StreamsHeartbeatIntervalMs),
		StreamsNumStandbyReplicas:    num(StreamsNumStandbyReplicas),
		StreamsInitialRebalanceDelay: ms(StreamsInitialRebalanceDelay),
		StreamsAssignmentInterval:    ms(StreamsAssignmentIntervalMs),
	}
	if rest, ok := strings.CutPrefix(v.ShareAutoOffsetReset, shareAutoOffsetResetByDuration); ok {
		v.ShareAutoOffsetResetBy, _ = ParseISODuration(strings.TrimSpace(rest))
	}
	return v
}

// brokerBound is the broker's bound key: its override when it is an
// integer, else Kafka's default.
func brokerBound(broker map[string]string, key string) int64 {
	if v, ok := broker[key]; ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32); err == nil {
			return n
		}
	}
	return brokerBoundDefaults[key]
}

// Check checks a group's whole overrides (as they would be after an
// alteration) as Kafka's GroupConfig.validate does: names, then each
// value's type, own bound and choices, then the values in force against
// the broker's min and max keys, and each session timeout against its
// heartbeat interval. It returns the overrides normalized. Refusals wrap
// kerr.InvalidConfig with Kafka's messages.
func Check(overrides, broker map[string]string) (map[string]string, error) {
	names := make([]string, 0, len(overrides))
	for k := range overrides {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make(map[string]string, len(overrides))
	for _, k := range names {
		d, ok := Lookup(k)
		if !ok {
			return nil, invalid("Unknown group config name: %s", k)
		}
		n, err := d.parse(overrides[k])
		if err != nil {
			return nil, err
		}
		out[k] = n
	}
	val := func(name string) int64 {
		d, _ := Lookup(name)
		v, _ := inForce(d, out, broker)
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	for _, d := range Defs {
		if d.Type != TypeInt {
			continue
		}
		v := val(d.Name)
		if d.BrokerMin != "" && v < brokerBound(broker, d.BrokerMin) {
			return nil, invalid("%s must be greater than or equal to %s", d.Name, d.BrokerMin)
		}
		if d.BrokerMax != "" && v > brokerBound(broker, d.BrokerMax) {
			return nil, invalid("%s must be less than or equal to %s", d.Name, d.BrokerMax)
		}
	}
	for _, p := range [][2]string{
		{ConsumerSessionTimeoutMs, ConsumerHeartbeatIntervalMs},
		{ShareSessionTimeoutMs, ShareHeartbeatIntervalMs},
		{StreamsSessionTimeoutMs, StreamsHeartbeatIntervalMs},
	} {
		if val(p[0]) <= val(p[1]) {
			return nil, invalid("%s must be greater than %s", p[0], p[1])
		}
	}
	return out, nil
}

// Entry is one key as DescribeConfigs shows it for a group.
type Entry struct {
	Def
	Value  string
	Source Source
	// Synonyms are, most specific first, the group's override and the
	// broker's key, those that are set (Kafka's synonyms for a group key).
	Synonyms []Synonym
}

// Synonym is one DescribeConfigs synonym.
type Synonym struct {
	Name, Value string
	Source      Source
}

// Describe lists every key for a group with overrides under broker, in
// Kafka's order.
func Describe(overrides, broker map[string]string) []Entry {
	out := make([]Entry, 0, len(Defs))
	for _, d := range Defs {
		v, src := inForce(d, overrides, broker)
		e := Entry{Def: d, Value: v, Source: src}
		if src == SourceGroup {
			e.Synonyms = append(e.Synonyms, Synonym{Name: d.Name, Value: v, Source: SourceGroup})
		}
		if d.BrokerKey != "" {
			if raw, ok := broker[d.BrokerKey]; ok {
				if n, err := d.parse(raw); err == nil {
					e.Synonyms = append(e.Synonyms, Synonym{Name: d.BrokerKey, Value: n, Source: SourceStaticBroker})
				}
			}
		}
		out = append(out, e)
	}
	return out
}
