package quotas

import (
	"fmt"
	"net/netip"
)

// Snapshot is the quota values of every entity that has any. Immutable
// once published: Apply builds a new one.
type Snapshot struct {
	m map[Entity]Values
	// keys counts the entities setting each quota key, so that a key set
	// nowhere (the usual case: no quotas at all) costs the produce and
	// fetch paths one lookup instead of resolving eight levels.
	keys map[string]int
}

// newSnapshot wraps m (owned by the snapshot from now on).
func newSnapshot(m map[Entity]Values) *Snapshot {
	s := &Snapshot{m: m, keys: map[string]int{}}
	for _, vals := range m {
		for k := range vals {
			s.keys[k]++
		}
	}
	return s
}

// Sets reports whether any entity sets key (a nil snapshot: none).
func (s *Snapshot) Sets(key string) bool { return s != nil && s.keys[key] > 0 }

// Len is the number of entities with quotas.
func (s *Snapshot) Len() int { return len(s.m) }

// Get returns e's values (nil: none); do not modify them.
func (s *Snapshot) Get(e Entity) Values { return s.m[e] }

// Alteration is one entity's changes.
type Alteration struct {
	Entity Entity `json:"entity"`
	Ops    []Op   `json:"ops"`
}

// with returns a new snapshot with alts applied (each already validated).
func (s *Snapshot) with(alts []Alteration) *Snapshot {
	m := make(map[Entity]Values, len(s.m)+len(alts))
	for e, v := range s.m {
		m[e] = v
	}
	for _, a := range alts {
		vals := Values{}
		for k, v := range m[a.Entity] {
			vals[k] = v
		}
		for _, op := range a.Ops {
			if op.Remove {
				delete(vals, op.Key)
			} else {
				vals[op.Key] = op.Value
			}
		}
		if len(vals) == 0 {
			delete(m, a.Entity)
		} else {
			m[a.Entity] = vals
		}
	}
	return newSnapshot(m)
}

// MatchType is a describe filter component's kind (Kafka's match_type).
type MatchType int8

const (
	MatchExact   MatchType = 0 // the name given
	MatchDefault MatchType = 1 // the type's default
	MatchAny     MatchType = 2 // any name or the default, but present
)

// Component is one describe filter component.
type Component struct {
	Type  string
	Match MatchType
	Name  *string
}

// filter is a checked describe filter: per part, whether it is
// constrained and how.
type filter struct {
	strict bool
	n      int // components
	user   *Component
	client *Component
	ip     *Component
}

// Describe returns the entities filter matches and their values, as
// Kafka's DescribeClientQuotas: every component's entity part must match
// it; strict also requires the entity to have no other part. A filter of
// ip components matches nothing (Regent keeps no ip quotas).
func (s *Snapshot) Describe(comps []Component, strict bool) (map[Entity]Values, error) {
	f := filter{strict: strict, n: len(comps)}
	for i := range comps {
		c := &comps[i]
		switch c.Type {
		case "":
			return nil, invalid("invalid empty entity type")
		case TypeUser, TypeClientID, TypeIP:
		default:
			return nil, &Error{Code: codeUnsupportedVersion, Msg: "unsupported entity type " + c.Type}
		}
		if (c.Type == TypeUser && f.user != nil) || (c.Type == TypeClientID && f.client != nil) || (c.Type == TypeIP && f.ip != nil) {
			return nil, invalid("entity type %s cannot appear more than once in the filter", c.Type)
		}
		switch c.Match {
		case MatchExact:
			if c.Name == nil {
				return nil, invalid("request specified MATCH_TYPE_EXACT, but set match string to null")
			}
		case MatchDefault, MatchAny:
			if c.Name != nil {
				return nil, invalid("request specified match type %d, but also specified a match string", c.Match)
			}
		default:
			return nil, &Error{Code: codeUnsupportedVersion, Msg: fmt.Sprintf("unknown match type %d", c.Match)}
		}
		switch c.Type {
		case TypeUser:
			f.user = c
		case TypeClientID:
			f.client = c
		default:
			// Matched on the canonical form ip entities are stored in.
			ip := *c
			if c.Name != nil {
				if a, err := netip.ParseAddr(*c.Name); err == nil {
					n := a.Unmap().String()
					ip.Name = &n
				}
			}
			f.ip = &ip
		}
	}
	if f.ip != nil && (f.user != nil || f.client != nil) {
		return nil, invalid("invalid entity filter component combination: an ip filter component should not be used with a user or client-id filter component")
	}
	out := map[Entity]Values{}
	for e, v := range s.m {
		if f.matches(e) {
			out[e] = v
		}
	}
	return out, nil
}

func (f *filter) matches(e Entity) bool {
	if f.strict {
		parts := 0
		if e.HasUser {
			parts++
		}
		if e.HasClient {
			parts++
		}
		if e.HasIP {
			parts++
		}
		if parts != f.n {
			return false
		}
	}
	return partMatches(f.user, e.HasUser, e.UserDefault, e.User) &&
		partMatches(f.client, e.HasClient, e.ClientDefault, e.Client) &&
		partMatches(f.ip, e.HasIP, e.IPDefault, e.IP)
}

func partMatches(c *Component, has, def bool, name string) bool {
	if c == nil {
		return true
	}
	if !has {
		return false
	}
	switch c.Match {
	case MatchExact:
		return !def && name == *c.Name
	case MatchDefault:
		return def
	default:
		return true
	}
}
