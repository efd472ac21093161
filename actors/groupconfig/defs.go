// Package groupconfig holds GROUP config resources (KIP-848 group configs):
// per-group overrides of the consumer, share and streams group settings,
// replicated as topic configs are, with Kafka 4.3's keys, types, bounds
// and checks (its GroupConfig). The KIP-848 coordinator reads the consumer
// keys of a group through Store.Values; the share and streams keys are
// stored and checked for the coordinators that serve those group types.
package groupconfig

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Type is a key's Kafka config type.
type Type int8

// The types group configs use (numbered as Kafka's DescribeConfigs
// config_type).
const (
	TypeBoolean Type = 1
	TypeString  Type = 2
	TypeInt     Type = 3
)

// Def is one group config key.
type Def struct {
	Name string
	Type Type
	// Default is Kafka's default, used when neither the group nor the
	// broker (BrokerKey) sets it.
	Default string
	// Min is the key's own lower bound (Kafka's atLeast); ints only.
	Min int64
	// Choices are a string key's legal values (by_duration: takes a
	// duration suffix).
	Choices []string
	// BrokerKey is the broker config that gives the default (Kafka's
	// synonym), "" when none.
	BrokerKey string
	// BrokerMin and BrokerMax name the broker configs bounding the value
	// (with their Kafka defaults), "" when unbounded; ints only.
	BrokerMin, BrokerMax string
	Doc                  string
}

// Kafka 4.3's group config keys.
const (
	ConsumerSessionTimeoutMs       = "consumer.session.timeout.ms"
	ConsumerHeartbeatIntervalMs    = "consumer.heartbeat.interval.ms"
	ConsumerAssignmentIntervalMs   = "consumer.assignment.interval.ms"
	ShareSessionTimeoutMs          = "share.session.timeout.ms"
	ShareHeartbeatIntervalMs       = "share.heartbeat.interval.ms"
	ShareRecordLockDurationMs      = "share.record.lock.duration.ms"
	ShareDeliveryCountLimit        = "share.delivery.count.limit"
	SharePartitionMaxRecordLocks   = "share.partition.max.record.locks"
	ShareAutoOffsetReset           = "share.auto.offset.reset"
	ShareIsolationLevel            = "share.isolation.level"
	ShareRenewAcknowledgeEnable    = "share.renew.acknowledge.enable"
	ShareAssignmentIntervalMs      = "share.assignment.interval.ms"
	StreamsSessionTimeoutMs        = "streams.session.timeout.ms"
	StreamsHeartbeatIntervalMs     = "streams.heartbeat.interval.ms"
	StreamsNumStandbyReplicas      = "streams.num.standby.replicas"
	StreamsInitialRebalanceDelay   = "streams.initial.rebalance.delay.ms"
	StreamsAssignmentIntervalMs    = "streams.assignment.interval.ms"
	shareAutoOffsetResetByDuration = "by_duration:"
)

// Defs are the keys in Kafka's order.
var Defs = []Def{
	{Name: ConsumerSessionTimeoutMs, Type: TypeInt, Default: "45000", Min: 1, BrokerKey: "group.consumer.session.timeout.ms",
		BrokerMin: "group.consumer.min.session.timeout.ms", BrokerMax: "group.consumer.max.session.timeout.ms",
		Doc: "The timeout to detect client failures when using the consumer group protocol."},
	{Name: ConsumerHeartbeatIntervalMs, Type: TypeInt, Default: "5000", Min: 1, BrokerKey: "group.consumer.heartbeat.interval.ms",
		BrokerMin: "group.consumer.min.heartbeat.interval.ms", BrokerMax: "group.consumer.max.heartbeat.interval.ms",
		Doc: "The heartbeat interval given to the members of a consumer group."},
	{Name: ConsumerAssignmentIntervalMs, Type: TypeInt, Default: "1000", Min: 0, BrokerKey: "group.consumer.assignment.interval.ms",
		BrokerMin: "group.consumer.min.assignment.interval.ms", BrokerMax: "group.consumer.max.assignment.interval.ms",
		Doc: "The interval between assignment computations of a consumer group. Stored and checked; Regent computes assignments at each change."},
	{Name: ShareSessionTimeoutMs, Type: TypeInt, Default: "45000", Min: 1, BrokerKey: "group.share.session.timeout.ms",
		BrokerMin: "group.share.min.session.timeout.ms", BrokerMax: "group.share.max.session.timeout.ms",
		Doc: "The timeout to detect client failures when using the share group protocol."},
	{Name: ShareHeartbeatIntervalMs, Type: TypeInt, Default: "5000", Min: 1, BrokerKey: "group.share.heartbeat.interval.ms",
		BrokerMin: "group.share.min.heartbeat.interval.ms", BrokerMax: "group.share.max.heartbeat.interval.ms",
		Doc: "The heartbeat interval given to the members of a share group."},
	{Name: ShareRecordLockDurationMs, Type: TypeInt, Default: "30000", Min: 1000, BrokerKey: "group.share.record.lock.duration.ms",
		BrokerMin: "group.share.min.record.lock.duration.ms", BrokerMax: "group.share.max.record.lock.duration.ms",
		Doc: "The record acquisition lock duration in milliseconds for share groups."},
	{Name: ShareDeliveryCountLimit, Type: TypeInt, Default: "5", Min: 2, BrokerKey: "group.share.delivery.count.limit",
		BrokerMin: "group.share.min.delivery.count.limit", BrokerMax: "group.share.max.delivery.count.limit",
		Doc: "The maximum number of delivery attempts for a record delivered to a share group."},
	{Name: SharePartitionMaxRecordLocks, Type: TypeInt, Default: "2000", Min: 100, BrokerKey: "group.share.partition.max.record.locks",
		BrokerMin: "group.share.min.partition.max.record.locks", BrokerMax: "group.share.max.partition.max.record.locks",
		Doc: "Share-group record lock limit per share-partition."},
	{Name: ShareAutoOffsetReset, Type: TypeString, Default: "latest", Choices: []string{"latest", "earliest", shareAutoOffsetResetByDuration},
		Doc: "The strategy to initialize the share-partition start offset: earliest, latest, or by_duration:<ISO-8601 duration> (PnDTnHnMn.nS, not negative)."},
	{Name: ShareIsolationLevel, Type: TypeString, Default: "read_uncommitted", Choices: []string{"read_committed", "read_uncommitted"},
		Doc: "Controls how to read records written transactionally: read_committed delivers only committed transactional records, read_uncommitted all of them."},
	{Name: ShareRenewAcknowledgeEnable, Type: TypeBoolean, Default: "true",
		Doc: "Whether the renew acknowledge type is enabled for the share group."},
	{Name: ShareAssignmentIntervalMs, Type: TypeInt, Default: "1000", Min: 0, BrokerKey: "group.share.assignment.interval.ms",
		BrokerMin: "group.share.min.assignment.interval.ms", BrokerMax: "group.share.max.assignment.interval.ms",
		Doc: "The interval between assignment computations of a share group."},
	{Name: StreamsSessionTimeoutMs, Type: TypeInt, Default: "45000", Min: 1, BrokerKey: "group.streams.session.timeout.ms",
		BrokerMin: "group.streams.min.session.timeout.ms", BrokerMax: "group.streams.max.session.timeout.ms",
		Doc: "The timeout to detect client failures when using the streams group protocol."},
	{Name: StreamsHeartbeatIntervalMs, Type: TypeInt, Default: "5000", Min: 1, BrokerKey: "group.streams.heartbeat.interval.ms",
		BrokerMin: "group.streams.min.heartbeat.interval.ms", BrokerMax: "group.streams.max.heartbeat.interval.ms",
		Doc: "The heartbeat interval given to the members of a streams group."},
	{Name: StreamsNumStandbyReplicas, Type: TypeInt, Default: "0", Min: 0, BrokerKey: "group.streams.num.standby.replicas",
		BrokerMax: "group.streams.max.standby.replicas",
		Doc:       "The number of standby replicas for each task of a streams group."},
	{Name: StreamsInitialRebalanceDelay, Type: TypeInt, Default: "3000", Min: 0, BrokerKey: "group.streams.initial.rebalance.delay.ms",
		Doc: "The delay of a new streams group's first rebalance. Stored and checked; Regent assigns a new streams group's tasks at once."},
	{Name: StreamsAssignmentIntervalMs, Type: TypeInt, Default: "1000", Min: 0, BrokerKey: "group.streams.assignment.interval.ms",
		BrokerMin: "group.streams.min.assignment.interval.ms", BrokerMax: "group.streams.max.assignment.interval.ms",
		Doc: "The interval between assignment computations of a streams group. Stored and checked; Regent computes assignments at each change."},
}

// brokerBoundDefaults are Kafka's defaults of the broker configs bounding
// group configs (GroupCoordinatorConfig, ShareGroupConfig).
var brokerBoundDefaults = map[string]int64{
	"group.consumer.min.session.timeout.ms":      45000,
	"group.consumer.max.session.timeout.ms":      60000,
	"group.consumer.min.heartbeat.interval.ms":   5000,
	"group.consumer.max.heartbeat.interval.ms":   15000,
	"group.consumer.min.assignment.interval.ms":  0,
	"group.consumer.max.assignment.interval.ms":  15000,
	"group.share.min.session.timeout.ms":         45000,
	"group.share.max.session.timeout.ms":         60000,
	"group.share.min.heartbeat.interval.ms":      5000,
	"group.share.max.heartbeat.interval.ms":      15000,
	"group.share.min.record.lock.duration.ms":    15000,
	"group.share.max.record.lock.duration.ms":    60000,
	"group.share.min.delivery.count.limit":       2,
	"group.share.max.delivery.count.limit":       10,
	"group.share.min.partition.max.record.locks": 100,
	"group.share.max.partition.max.record.locks": 4000,
	"group.share.min.assignment.interval.ms":     0,
	"group.share.max.assignment.interval.ms":     15000,
	"group.streams.min.session.timeout.ms":       45000,
	"group.streams.max.session.timeout.ms":       60000,
	"group.streams.min.heartbeat.interval.ms":    5000,
	"group.streams.max.heartbeat.interval.ms":    15000,
	"group.streams.max.standby.replicas":         2,
	"group.streams.min.assignment.interval.ms":   0,
	"group.streams.max.assignment.interval.ms":   15000,
}

// Lookup returns the def of name.
func Lookup(name string) (Def, bool) {
	for _, d := range Defs {
		if d.Name == name {
			return d, true
		}
	}
	return Def{}, false
}

// Error is a refusal: Kafka's error code and message. Error() is the
// message alone, so that it can be sent as the response's message.
type Error struct {
	Code *kerr.Error
	Msg  string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Code }

// invalid is an INVALID_CONFIG refusal with Kafka's message.
func invalid(format string, args ...any) error {
	return &Error{Code: kerr.InvalidConfig, Msg: fmt.Sprintf(format, args...)}
}

// parse checks raw against d's type, own bound and choices (not the
// broker's bounds) and returns it normalized.
func (d Def) parse(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	switch d.Type {
	case TypeInt:
		n, err := strconv.ParseInt(raw, 10, 32)
		if err != nil {
			return "", invalid("Invalid value %s for configuration %s: Not a number of type INT", raw, d.Name)
		}
		if n < d.Min {
			return "", invalid("Invalid value %d for configuration %s: Value must be at least %d", n, d.Name, d.Min)
		}
		return strconv.FormatInt(n, 10), nil
	case TypeBoolean:
		switch strings.ToLower(raw) {
		case "true":
			return "true", nil
		case "false":
			return "false", nil
		}
		return "", invalid("Invalid value %s for configuration %s: Expected value to be either true or false", raw, d.Name)
	default:
		if d.Name == ShareAutoOffsetReset {
			return raw, checkAutoOffsetReset(raw)
		}
		for _, c := range d.Choices {
			if raw == c {
				return raw, nil
			}
		}
		return "", invalid("Invalid value %s for configuration %s: String must be one of: %s", raw, d.Name, strings.Join(d.Choices, ", "))
	}
}

// checkAutoOffsetReset accepts latest, earliest and by_duration:<ISO-8601
// duration, not negative>, as Kafka's share.auto.offset.reset validator.
func checkAutoOffsetReset(v string) error {
	lv := strings.ToLower(v)
	if lv == "latest" || lv == "earliest" {
		return nil
	}
	if !strings.HasPrefix(lv, shareAutoOffsetResetByDuration) {
		return invalid("Invalid value %s for configuration %s: Invalid value `%s` for configuration %s. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'.", v, ShareAutoOffsetReset, v, ShareAutoOffsetReset)
	}
	iso := strings.TrimSpace(v[len(shareAutoOffsetResetByDuration):])
	d, err := ParseISODuration(iso)
	if err != nil {
		return invalid("Invalid value %s for configuration %s: Unable to parse duration string '%s' for configuration %s. The value must be in ISO 8601 format.", v, ShareAutoOffsetReset, iso, ShareAutoOffsetReset)
	}
	if d < 0 {
		return invalid("Invalid value %s for configuration %s: Negative duration is not supported in %s configuration.", v, ShareAutoOffsetReset, ShareAutoOffsetReset)
	}
	return nil
}

// ParseISODuration reads an ISO-8601 duration as Java's Duration.parse
// does: [-]PnDTnHnMn.nS, each part optional (at least one), with signs.
func ParseISODuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not an ISO-8601 duration (PnDTnHnMn.nS)", s)
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	} else if strings.HasPrefix(s, "+") {
		s = s[1:]
	}
	if len(s) < 2 || (s[0] != 'P' && s[0] != 'p') {
		return 0, bad
	}
	s = s[1:]
	var total float64
	parts := 0
	inTime := false
	for len(s) > 0 {
		if s[0] == 'T' || s[0] == 't' {
			if inTime || len(s) == 1 {
				return 0, bad
			}
			inTime, s = true, s[1:]
			continue
		}
		i := 0
		for i < len(s) && (s[i] == '-' || s[i] == '+' || s[i] == '.' || s[i] == ',' || (s[i] >= '0' && s[i] <= '9')) {
			i++
		}
		if i == 0 || i == len(s) {
			return 0, bad
		}
		num, err := strconv.ParseFloat(strings.ReplaceAll(s[:i], ",", "."), 64)
		if err != nil {
			return 0, bad
		}
		unit := s[i] | 0x20 // lower case
		var scale float64
		switch {
		case unit == 'd' && !inTime:
			scale = float64(24 * time.Hour)
		case unit == 'h' && inTime:
			scale = float64(time.Hour)
		case unit == 'm' && inTime:
			scale = float64(time.Minute)
		case unit == 's' && inTime:
			scale = float64(time.Second)
		default:
			return 0, bad
		}
		if unit != 's' && strings.ContainsAny(s[:i], ".,") {
			return 0, bad // only seconds take a fraction
		}
		total += num * scale
		parts++
		s = s[i+1:]
	}
	if parts == 0 {
		return 0, bad
	}
	if neg {
		total = -total
	}
	return time.Duration(total), nil
}
