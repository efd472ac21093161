package logconfig

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The connection-limit keys: dynamic broker configs, as in Kafka, applied
// by the listeners (netio) to the connections accepted after a change.
const (
	MaxConnectionsKey           = "max.connections"
	MaxConnectionsPerIPKey      = "max.connections.per.ip"
	MaxConnectionsPerIPOverKey  = "max.connections.per.ip.overrides"
	DefaultMaxConnections       = 10000
	DefaultMaxConnectionsPerIP  = 2147483647 // Kafka's: no bound
	maxConnectionsPerIPZeroHint = "Value 0 for max.connections.per.ip is only allowed if max.connections.per.ip.overrides is set"
)

// ParseConnectionOverrides parses max.connections.per.ip.overrides,
// "ADDR:COUNT,..." (COUNT 0 or more). Kafka also takes host names there;
// Regent takes addresses only and says so.
func ParseConnectionOverrides(s string) (map[netip.Addr]int, error) {
	out := map[netip.Addr]int{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndex(item, ":")
		if i <= 0 {
			return nil, fmt.Errorf("%q is not ADDR:COUNT", item)
		}
		addr, err := netip.ParseAddr(strings.Trim(item[:i], "[]"))
		if err != nil {
			return nil, fmt.Errorf("%q: %v (addresses only, not host names)", item, err)
		}
		n, err := strconv.Atoi(item[i+1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: the count must be 0 or more", item)
		}
		out[addr.Unmap()] = n
	}
	return out, nil
}

func connectionOverridesV() validator {
	return func(name, raw string) error {
		if _, err := ParseConnectionOverrides(raw); err != nil {
			return invalidValue(name, raw, err.Error())
		}
		return nil
	}
}

// CheckConnectionLimits refuses, as Kafka does, a max.connections.per.ip of
// 0 without overrides: it would refuse every client, the admin tools that
// could undo it included.
func CheckConnectionLimits(overrides map[string]string) error {
	if strings.TrimSpace(overrides[MaxConnectionsPerIPKey]) != "0" {
		return nil
	}
	if ov, err := ParseConnectionOverrides(overrides[MaxConnectionsPerIPOverKey]); err == nil && len(ov) > 0 {
		return nil
	}
	return sentence(MaxConnectionsPerIPKey, maxConnectionsPerIPZeroHint, maxConnectionsPerIPZeroHint)
}

// ConnectionLimits are the connection-limit keys' values in b: max
// connections per listener, per address (< 0: none) and per named
// address. Values that do not parse (validated before they are stored)
// count as unset.
func (b Broker) ConnectionLimits() (maxConns, perIP int, overrides map[netip.Addr]int) {
	maxConns, perIP = DefaultMaxConnections, -1
	if v, ok := b.get(MaxConnectionsKey); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
			maxConns = n
		}
	}
	if v, ok := b.get(MaxConnectionsPerIPKey); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 && n < DefaultMaxConnectionsPerIP {
			perIP = n
		}
	}
	if v, ok := b.get(MaxConnectionsPerIPOverKey); ok {
		overrides, _ = ParseConnectionOverrides(v)
	}
	return maxConns, perIP, overrides
}
