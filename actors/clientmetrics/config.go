// Package clientmetrics holds client-metrics subscriptions (KIP-714): the
// CLIENT_METRICS config resources, replicated like the topic registry so
// every node serves the same ones, and the per-client-instance state that
// GetTelemetrySubscriptions and PushTelemetry keep (Manager).
package clientmetrics

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The keys of a CLIENT_METRICS resource, as Kafka names them.
const (
	KeyMetrics  = "metrics"
	KeyInterval = "interval.ms"
	KeyMatch    = "match"
)

// Kafka's bounds and default for interval.ms.
const (
	DefaultIntervalMs = 300_000
	MinIntervalMs     = 100
	MaxIntervalMs     = 3_600_000
)

// AllMetrics in a subscription's metrics list subscribes every metric;
// sent alone as the requested metrics, the Java client reads it as "all".
const AllMetrics = "*"

// The client selectors a match entry may name (KIP-714).
const (
	MatchInstanceID      = "client_instance_id"
	MatchClientID        = "client_id"
	MatchSoftwareName    = "client_software_name"
	MatchSoftwareVersion = "client_software_version"
	MatchSourceAddress   = "client_source_address"
	MatchSourcePort      = "client_source_port"
)

var matchKeys = []string{MatchInstanceID, MatchClientID, MatchSoftwareName, MatchSoftwareVersion, MatchSourceAddress, MatchSourcePort}

// Subscription is one parsed CLIENT_METRICS resource.
type Subscription struct {
	Name string
	// Metrics are metric-name prefixes; AllMetrics subscribes all, empty none.
	Metrics    []string
	IntervalMs int32
	// Match maps a selector to its pattern, anchored at both ends (Kafka
	// matches the whole value); empty: every client.
	Match map[string]*regexp.Regexp
	// Configs are the resource's keys as set, for DescribeConfigs.
	Configs map[string]string
}

// splitList reads a Kafka list value: comma separated, trimmed, empty
// items dropped.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Parse checks a resource's configs as Kafka's ClientMetricsConfigs.validate
// does and reads them: an empty name or an unknown key is INVALID_REQUEST,
// a bad value INVALID_CONFIG. Match patterns are Go regular expressions
// (RE2), which accept the usual Java patterns except backreferences and
// lookaround.
func Parse(name string, configs map[string]string) (Subscription, error) {
	if name == "" {
		return Subscription{}, fmt.Errorf("%w: client metrics subscription name must not be empty", kerr.InvalidRequest)
	}
	sub := Subscription{Name: name, IntervalMs: DefaultIntervalMs, Configs: configs}
	for k, v := range configs {
		switch k {
		case KeyMetrics:
			sub.Metrics = splitList(v)
		case KeyInterval:
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil {
				return Subscription{}, fmt.Errorf("%w: invalid value %q for configuration %s: not a number", kerr.InvalidConfig, v, KeyInterval)
			}
			if n < MinIntervalMs || n > MaxIntervalMs {
				return Subscription{}, fmt.Errorf("%w: invalid value %d for configuration %s: value must be in [%d, %d]", kerr.InvalidConfig, n, KeyInterval, MinIntervalMs, MaxIntervalMs)
			}
			sub.IntervalMs = int32(n)
		case KeyMatch:
			m, err := parseMatch(splitList(v))
			if err != nil {
				return Subscription{}, err
			}
			sub.Match = m
		default:
			return Subscription{}, fmt.Errorf("%w: unknown client metric configuration: %s", kerr.InvalidRequest, k)
		}
	}
	return sub, nil
}

func parseMatch(entries []string) (map[string]*regexp.Regexp, error) {
	m := map[string]*regexp.Regexp{}
	for _, e := range entries {
		k, pat, ok := strings.Cut(e, "=")
		k, pat = strings.TrimSpace(k), strings.TrimSpace(pat)
		if !ok || k == "" || pat == "" {
			return nil, fmt.Errorf("%w: illegal client matching pattern %q: want selector=pattern", kerr.InvalidConfig, e)
		}
		if !slices.Contains(matchKeys, k) {
			return nil, fmt.Errorf("%w: unknown client matching selector %q: want one of %s", kerr.InvalidConfig, k, strings.Join(matchKeys, ", "))
		}
		re, err := regexp.Compile("^(?:" + pat + ")$")
		if err != nil {
			return nil, fmt.Errorf("%w: illegal regular expression for %s: %v", kerr.InvalidConfig, k, err)
		}
		m[k] = re
	}
	return m, nil
}

// The ops of IncrementalAlterConfigs.
const (
	OpSet      = 0
	OpDelete   = 1
	OpAppend   = 2
	OpSubtract = 3
)

// Op is one IncrementalAlterConfigs operation on a resource.
type Op struct {
	Key   string
	Value *string
	Op    int8
}

// Incremental applies ops to a copy of cur and checks the result. APPEND
// and SUBTRACT work on the list keys (metrics, match) only.
func Incremental(name string, cur map[string]string, ops []Op) (map[string]string, error) {
	next := make(map[string]string, len(cur)+len(ops))
	for k, v := range cur {
		next[k] = v
	}
	for _, op := range ops {
		val := ""
		if op.Value != nil {
			val = *op.Value
		}
		list := op.Key == KeyMetrics || op.Key == KeyMatch
		switch op.Op {
		case OpSet:
			next[op.Key] = val
		case OpDelete:
			delete(next, op.Key)
		case OpAppend, OpSubtract:
			if !list {
				return nil, fmt.Errorf("%w: config %s is not a list: APPEND and SUBTRACT need a list", kerr.InvalidConfig, op.Key)
			}
			items := splitList(next[op.Key])
			for _, it := range splitList(val) {
				if op.Op == OpAppend && !slices.Contains(items, it) {
					items = append(items, it)
				}
				if op.Op == OpSubtract {
					items = slices.DeleteFunc(items, func(s string) bool { return s == it })
				}
			}
			next[op.Key] = strings.Join(items, ",")
		default:
			return nil, fmt.Errorf("%w: unknown config operation %d", kerr.InvalidRequest, op.Op)
		}
	}
	if _, err := Parse(name, next); err != nil {
		return nil, err
	}
	return next, nil
}
