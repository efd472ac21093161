package topics

import (
	"strconv"
	"strings"

	"github.com/regent-broker/regent/storage/logconfig"
)

// NumPartitions is the broker's num.partitions (default 1).
func NumPartitions(b logconfig.Broker) int32 {
	if v, ok := b.Overrides["num.partitions"]; ok {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil && n > 0 {
			return int32(n)
		}
	}
	return 1
}

// AutoCreate is the broker's auto.create.topics.enable (default true).
func AutoCreate(b logconfig.Broker) bool {
	if v, ok := b.Overrides["auto.create.topics.enable"]; ok {
		return strings.EqualFold(v, "true")
	}
	return true
}
