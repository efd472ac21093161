package logconfig

import (
	"slices"
	"strconv"
	"strings"
)

// Incremental applies IncrementalAlterConfigs operations to a topic's
// current overrides and returns the new overrides after validating the
// whole result with the same rules as Validate. current is not modified.
//
// SET stores the value, DELETE removes the override (back to the inherited
// value), APPEND adds each comma-separated item not already present,
// SUBTRACT removes each item. APPEND and SUBTRACT work on LIST keys only
// (cleanup.policy, the throttled-replica lists) and start from Kafka's
// default when the topic has no override, so APPEND compact on a fresh
// topic gives "delete,compact".
//
// Duplicate keys and null values for anything but DELETE are refused with
// InvalidRequest() true, as Kafka does; everything else is INVALID_CONFIG.
func Incremental(current map[string]string, ops []Op) (map[string]string, error) {
	seen := make(map[string]bool, len(ops))
	var nulls []string
	for _, op := range ops {
		if seen[op.Key] {
			e := sentence(op.Key, "duplicate config keys", "Error due to duplicate config keys")
			e.invalidRequest = true
			return nil, e
		}
		seen[op.Key] = true
		if op.Op < OpSet || op.Op > OpSubtract {
			e := sentence(op.Key, "unknown operation",
				"Unknown alter config operation "+strconv.Itoa(int(op.Op))+" for "+op.Key)
			e.invalidRequest = true
			return nil, e
		}
		if op.Op != OpDelete && op.Value == nil {
			nulls = append(nulls, op.Key)
		}
	}
	if len(nulls) > 0 {
		e := sentence(strings.Join(nulls, ","), "Null value not supported",
			"Null value not supported for : "+strings.Join(nulls, ", "))
		e.invalidRequest = true
		return nil, e
	}

	next := make(map[string]string, len(current)+len(ops))
	for k, v := range current {
		next[k] = v
	}
	for _, op := range ops {
		switch op.Op {
		case OpSet:
			next[op.Key] = *op.Value
		case OpDelete:
			delete(next, op.Key)
		case OpAppend, OpSubtract:
			d, ok := LookupTopic(op.Key)
			if !ok || d.Type != TypeList {
				return nil, sentence(op.Key, "type is not LIST",
					"Can't "+opName(op.Op)+" to key "+op.Key+" because its type is not LIST.")
			}
			cur, ok := next[op.Key]
			if !ok {
				cur = d.Default
			}
			parts := listParts(cur)
			for _, item := range splitItems(*op.Value) {
				if op.Op == OpAppend {
					if !slices.Contains(parts, item) {
						parts = append(parts, item)
					}
				} else if i := slices.Index(parts, item); i >= 0 {
					parts = slices.Delete(parts, i, i+1)
				}
			}
			next[op.Key] = strings.Join(parts, ",")
		}
	}
	if err := validateTopic(next); err != nil {
		return nil, err
	}
	return next, nil
}

// listParts splits a stored list value into its non-empty items.
func listParts(v string) []string {
	var parts []string
	for _, p := range strings.Split(v, ",") {
		if p = javaTrim(p); p != "" {
			parts = append(parts, p)
		}
	}
	return parts
}

// splitItems splits an APPEND/SUBTRACT value on commas the way Java's
// String.split does (trailing empty items dropped, "" gives one empty
// item), trimming each item (Kafka does not trim; Regent does, so that
// "delete, compact" works item by item).
func splitItems(v string) []string {
	if v == "" {
		return []string{""}
	}
	items := strings.Split(v, ",")
	for i := range items {
		items[i] = javaTrim(items[i])
	}
	for len(items) > 0 && items[len(items)-1] == "" {
		items = items[:len(items)-1]
	}
	return items
}
