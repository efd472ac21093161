// Package quotas holds Kafka's client quotas (KIP-13, KIP-55, KIP-219,
// KIP-546): the replicated store of quota values per entity (a user, a
// client id, their defaults and combinations), the resolution of a
// connection's quota in Kafka's precedence order, and the windowed rates
// that turn a client's use into a throttle time.
package quotas

import (
	"fmt"
	"math"
	"sort"
)

// Quota keys served (Kafka's QuotaConfig names).
const (
	ProducerByteRate       = "producer_byte_rate"
	ConsumerByteRate       = "consumer_byte_rate"
	RequestPercentage      = "request_percentage"
	ControllerMutationRate = "controller_mutation_rate"
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
}

// Entity names what quotas apply to: a user part, a client-id part or
// both. A part is absent, the default (Kafka's <default>, a null name) or
// a name. Comparable, so a map key.
type Entity struct {
	HasUser     bool   `json:"has_user,omitempty"`
	UserDefault bool   `json:"user_default,omitempty"`
	User        string `json:"user,omitempty"`

	HasClient     bool   `json:"has_client,omitempty"`
	ClientDefault bool   `json:"client_default,omitempty"`
	Client        string `json:"client,omitempty"`
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
// type. An ip entity (connection_creation_rate, KIP-612) is refused:
// Regent does not serve connection-rate quotas.
func EntityFromParts(parts []Part) (Entity, error) {
	var e Entity
	if len(parts) == 0 {
		return e, invalid("invalid empty client quota entity")
	}
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
			return e, invalid("ip quota entities (connection_creation_rate) are not supported by Regent")
		case "":
			return e, invalid("invalid empty entity type in client quota entity")
		default:
			return e, &Error{Code: codeUnsupportedVersion, Msg: fmt.Sprintf("unsupported client quota entity type %q", p.Type)}
		}
	}
	return e, nil
}

// Parts is the entity as the wire carries it: user first, then client-id.
func (e Entity) Parts() []Part {
	var ps []Part
	if e.HasUser {
		p := Part{Type: TypeUser}
		if !e.UserDefault {
			n := e.User
			p.Name = &n
		}
		ps = append(ps, p)
	}
	if e.HasClient {
		p := Part{Type: TypeClientID}
		if !e.ClientDefault {
			n := e.Client
			p.Name = &n
		}
		ps = append(ps, p)
	}
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

// ValidateOps checks an entity's changes as Kafka's controller does: known
// keys, each at most once, values above 0, whole numbers for the byte
// rates.
func ValidateOps(ops []Op) error {
	seen := map[string]bool{}
	for _, op := range ops {
		integral, ok := keyIsIntegral[op.Key]
		if !ok {
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
