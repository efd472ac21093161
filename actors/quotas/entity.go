// Package quotas holds Kafka's client quotas (KIP-13, KIP-55, KIP-219,
// KIP-546): the replicated store of quota values per entity (a user, a
// client id, their defaults and combinations), the resolution of a
// connection's quota in Kafka's precedence order, and the windowed rates
// that turn a client's use into a throttle time.
package quotas

import (
	"fmt"
	"math"
	"net/netip"
	"sort"
)

// Quota keys served (Kafka's QuotaConfig names).
const (
	ProducerByteRate       = "producer_byte_rate"
	ConsumerByteRate       = "consumer_byte_rate"
	RequestPercentage      = "request_percentage"
	ControllerMutationRate = "controller_mutation_rate"
	// ConnectionCreationRate is the ip entities' only key (KIP-612):
	// new connections per second from one address.
	ConnectionCreationRate = "connection_creation_rate"
)

// Entity types (Kafka's ClientQuotaEntity).
const (
	TypeUser     = "user"
	TypeClientID = "client-id"
	TypeIP       = "ip"
)

// keyIsIntegral says which keys Kafka types as LONG (whole numbers); the
// others are DOUBLE.
var keyIsIntegral = map[string]bool{
	ProducerByteRate:       true,
	ConsumerByteRate:       true,
	RequestPercentage:      false,
	ControllerMutationRate: false,
	ConnectionCreationRate: true,
}

// Entity names what quotas apply to: a user part, a client-id part or
// both, or else an ip part alone. A part is absent, the default (Kafka's
// <default>, a null name) or a name; an ip's name is the address in its
// canonical text form. Comparable, so a map key.
type Entity struct {
	HasUser     bool   `json:"has_user,omitempty"`
	UserDefault bool   `json:"user_default,omitempty"`
	User        string `json:"user,omitempty"`

	HasClient     bool   `json:"has_client,omitempty"`
	ClientDefault bool   `json:"client_default,omitempty"`
	Client        string `json:"client,omitempty"`

	HasIP     bool   `json:"has_ip,omitempty"`
	IPDefault bool   `json:"ip_default,omitempty"`
	IP        string `json:"ip,omitempty"`
}

// Part is one (type, name) component of an entity as the wire carries it;
// a nil Name is the default.
type Part struct {
	Type string
	Name *string
}

// Error is a quota request's Kafka error with its message.
type Error struct {
	Code int16
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// codes used here (Kafka's): kept numeric so the state machine needs no
// wire package.
const (
	codeInvalidRequest     int16 = 42
	codeUnsupportedVersion int16 = 35
)

func invalid(format string, args ...any) *Error {
	return &Error{Code: codeInvalidRequest, Msg: fmt.Sprintf(format, args...)}
}

// EntityFromParts builds an entity from the wire's components, refusing
// what Kafka refuses: an empty list, an empty or repeated type, an unknown
// type, an ip beside a user or client id. An ip must be an address:
// Kafka also takes a host name and resolves it, Regent refuses one.
func EntityFromParts(parts []Part) (Entity, error) {
	var e Entity
	for _, p := range parts {
		switch p.Type {
		case TypeUser:
			if e.HasUser {
				return e, invalid("duplicate user component in client quota entity")
			}
			e.HasUser, e.UserDefault = true, p.Name == nil
			if p.Name != nil {
				e.User = *p.Name
			}
		case TypeClientID:
			if e.HasClient {
				return e, invalid("duplicate client-id component in client quota entity")
			}
			e.HasClient, e.ClientDefault = true, p.Name == nil
			if p.Name != nil {
				e.Client = *p.Name
			}
		case TypeIP:
			if e.HasIP {
				return e, invalid("duplicate ip component in client quota entity")
			}
			e.HasIP, e.IPDefault = true, p.Name == nil
			if p.Name != nil {
				a, err := netip.ParseAddr(*p.Name)
				if err != nil || a.Zone() != "" {
					return e, invalid("invalid quota entity: ip %q is not an IP address (Regent does not resolve host names)", *p.Name)
				}
				e.IP = a.Unmap().String()
			}
		case "":
			return e, invalid("invalid empty entity type in client quota entity")
		default:
			return e, &Error{Code: codeUnsupportedVersion, Msg: fmt.Sprintf("unsupported client quota entity type %q", p.Type)}
		}
	}
	return e, e.check()
}

// check refuses an entity of no part, or an ip beside a user or client
// id. EntityFromParts checks what the wire carries; the store checks again
// what it applies.
func (e Entity) check() error {
	switch {
	case e.HasIP && (e.HasUser || e.HasClient):
		return invalid("invalid quota entity combination: an ip entity cannot be combined with a user or client-id entity")
	case !e.HasUser && !e.HasClient && !e.HasIP:
		return invalid("invalid empty client quota entity")
	}
	return nil
}

// Parts is the entity as the wire carries it: user first, then client-id
// (or its ip).
func (e Entity) Parts() []Part {
	var ps []Part
	add := func(has bool, typ string, def bool, name string) {
		if !has {
			return
		}
		p := Part{Type: typ}
		if !def {
			p.Name = &name
		}
		ps = append(ps, p)
	}
	add(e.HasUser, TypeUser, e.UserDefault, e.User)
	add(e.HasClient, TypeClientID, e.ClientDefault, e.Client)
	add(e.HasIP, TypeIP, e.IPDefault, e.IP)
	return ps
}

func (e Entity) String() string {
	s := ""
	if e.HasUser {
		s = "user=" + partName(e.UserDefault, e.User)
	}
	if e.HasClient {
		if s != "" {
			s += ","
		}
		s += "client-id=" + partName(e.ClientDefault, e.Client)
	}
	if e.HasIP {
		s = "ip=" + partName(e.IPDefault, e.IP)
	}
	return s
}

func partName(def bool, name string) string {
	if def {
		return "<default>"
	}
	return name
}

// Op sets (Remove false) or removes one key of an entity.
type Op struct {
	Key    string  `json:"key"`
	Value  float64 `json:"value,omitempty"`
	Remove bool    `json:"remove,omitempty"`
}

// ValidateOps checks an entity's changes as Kafka's controller does: keys
// known for the entity's kind (connection_creation_rate for an ip, the
// others for users and client ids), each at most once, values above 0,
// whole numbers for the byte rates and the connection rate.
func ValidateOps(e Entity, ops []Op) error {
	seen := map[string]bool{}
	for _, op := range ops {
		integral, ok := keyIsIntegral[op.Key]
		if !ok || e.HasIP != (op.Key == ConnectionCreationRate) {
			return invalid("invalid configuration key %s", op.Key)
		}
		if seen[op.Key] {
			return invalid("duplicate quota key %s", op.Key)
		}
		seen[op.Key] = true
		if op.Remove {
			continue
		}
		switch {
		case math.IsNaN(op.Value) || math.IsInf(op.Value, 0):
			return invalid("quota %s must be a finite number", op.Key)
		case op.Value <= 0:
			return invalid("quota %s must be greater than 0", op.Key)
		case integral && op.Value > math.MaxInt64:
			return invalid("proposed value for %s is too large for a LONG", op.Key)
		case op.Key == ConnectionCreationRate && op.Value > math.MaxInt32:
			return invalid("proposed value for %s is too large for an INT", op.Key)
		case integral && math.Abs(math.Mod(op.Value, 1)) > 1e-6:
			return invalid("%s cannot be a fractional value", op.Key)
		}
	}
	return nil
}

// Values are an entity's quota values by key.
type Values map[string]float64

// Keys are the values' keys in order.
func (v Values) Keys() []string {
	ks := make([]string, 0, len(v))
	for k := range v {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
