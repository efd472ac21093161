package logconfig

import (
	"slices"
	"sort"
	"strconv"
	"strings"
)

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Validate checks topic configs from CreateTopics or AlterConfigs the way a
// Kafka 4.x controller does: null values first, then unknown names, then
// each value, then cross-key rules. Keys are checked in name order, so the
// error names the first offending key. Every error is a *ConfigError
// (INVALID_CONFIG).
//
// Values a topic does not set are taken at Kafka's defaults for the
// cross-key rules; broker overrides are not known here (Resolve checks the
// combination).
func Validate(configs map[string]*string) error {
	var nulls []string
	plain := make(map[string]string, len(configs))
	for _, k := range sortedKeys(configs) {
		if configs[k] == nil {
			nulls = append(nulls, k)
			continue
		}
		plain[k] = *configs[k]
	}
	if len(nulls) > 0 {
		keys := strings.Join(nulls, ",")
		return sentence(keys, "Null value not supported", "Null value not supported for topic configs: "+keys)
	}
	return validateTopic(plain)
}

func unknownTopic(name string) *ConfigError {
	return sentence(name, "Unknown topic config name", "Unknown topic config name: "+name)
}

// validateTopic checks a complete set of topic overrides.
func validateTopic(configs map[string]string) error {
	keys := sortedKeys(configs)
	for _, k := range keys {
		if _, ok := topicIndex[k]; !ok {
			return unknownTopic(k)
		}
	}
	for _, k := range keys {
		d := topicDefs[topicIndex[k]]
		if err := d.validate(configs[k]); err != nil {
			return err
		}
	}
	get := func(k string) int64 {
		raw, ok := configs[k]
		if !ok {
			raw = topicDefs[topicIndex[k]].Default
		}
		v, _ := parseIntegral(TypeLong, raw)
		return v
	}
	return compactionLagConflict(get("min.compaction.lag.ms"), get("max.compaction.lag.ms"))
}

func compactionLagConflict(minLag, maxLag int64) error {
	if minLag <= maxLag {
		return nil
	}
	return sentence("min.compaction.lag.ms", "greater than max.compaction.lag.ms",
		"conflict topic config setting min.compaction.lag.ms ("+strconv.FormatInt(minLag, 10)+
			") > max.compaction.lag.ms ("+strconv.FormatInt(maxLag, 10)+")")
}

// ValidateBroker checks an AlterConfigs/IncrementalAlterConfigs change on a
// BROKER resource (a broker id or the cluster default). Only keys Kafka can
// change at runtime are accepted (Def.ReadOnly false); read-only keys are
// refused with Kafka's "Cannot update these configs dynamically" message,
// and keys Regent does not know are refused too. Null values are refused
// as Kafka does (INVALID_REQUEST); use IncrementalAlterConfigs DELETE to
// remove a dynamic value.
func ValidateBroker(configs map[string]*string) error {
	keys := sortedKeys(configs)
	var nulls []string
	for _, k := range keys {
		if configs[k] == nil {
			nulls = append(nulls, k)
		}
	}
	if len(nulls) > 0 {
		e := sentence(strings.Join(nulls, ","), "Null value not supported",
			"Null value not supported for : "+strings.Join(nulls, ", "))
		e.invalidRequest = true
		return e
	}
	if err := checkBrokerKeys(keys); err != nil {
		return err
	}
	for _, k := range keys {
		if err := brokerDefs[brokerIndex[k]].validate(*configs[k]); err != nil {
			return err
		}
	}
	return nil
}

// checkBrokerKeys refuses, in Kafka's words, keys Regent does not know
// and keys Kafka cannot change at runtime. keys are sorted.
func checkBrokerKeys(keys []string) error {
	var unknown, readOnly []string
	for _, k := range keys {
		i, ok := brokerIndex[k]
		switch {
		case !ok:
			unknown = append(unknown, k)
		case brokerDefs[i].ReadOnly:
			readOnly = append(readOnly, k)
		}
	}
	if len(unknown) > 0 {
		return sentence(unknown[0], "Unknown broker config name",
			"Unknown broker config name: "+unknown[0])
	}
	if len(readOnly) > 0 {
		return sentence(strings.Join(readOnly, ","), "Cannot update these configs dynamically",
			"Cannot update these configs dynamically: Set("+strings.Join(readOnly, ", ")+")")
	}
	return nil
}

// ValidateBrokerDeletes checks IncrementalAlterConfigs DELETE operations
// on a BROKER resource: the keys must be ones Kafka lets change at
// runtime, as for ValidateBroker; deleting one that is not set is a no-op.
func ValidateBrokerDeletes(keys []string) error {
	return checkBrokerKeys(slices.Sorted(slices.Values(keys)))
}
