package acls

import (
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Set is an immutable, indexed set of bindings: a check looks up the
// resource's literal name, the literal wildcard and the prefixes of its
// type, never the whole set. Build one with NewSet; never mutate it.
type Set struct {
	all []ACL // sorted (see less), no duplicates
	// literal[type][name] and prefixed[type] (longest prefix first) hold
	// the bindings of each pattern kind; indexes into all are not kept so
	// a lookup touches only what it needs.
	literal  map[kmsg.ACLResourceType]map[string][]ACL
	prefixed map[kmsg.ACLResourceType][]ACL
	// types counts the bindings of each resource type (AuthorizeAny).
	types map[kmsg.ACLResourceType]int
}

// NewSet indexes acls (duplicates dropped). acls is not retained.
func NewSet(acls []ACL) *Set {
	s := &Set{literal: map[kmsg.ACLResourceType]map[string][]ACL{}, prefixed: map[kmsg.ACLResourceType][]ACL{}, types: map[kmsg.ACLResourceType]int{}}
	all := append([]ACL(nil), acls...)
	sort.Slice(all, func(i, j int) bool { return less(all[i], all[j]) })
	for i, a := range all {
		if i > 0 && all[i-1] == a {
			continue
		}
		s.all = append(s.all, a)
		s.types[a.ResourceType]++
		if a.PatternType == Prefixed {
			s.prefixed[a.ResourceType] = append(s.prefixed[a.ResourceType], a)
			continue
		}
		m := s.literal[a.ResourceType]
		if m == nil {
			m = map[string][]ACL{}
			s.literal[a.ResourceType] = m
		}
		m[a.ResourceName] = append(m[a.ResourceName], a)
	}
	return s
}

// less orders bindings for a stable listing and persisted file.
func less(a, b ACL) bool {
	switch {
	case a.ResourceType != b.ResourceType:
		return a.ResourceType < b.ResourceType
	case a.PatternType != b.PatternType:
		return a.PatternType < b.PatternType
	case a.ResourceName != b.ResourceName:
		return a.ResourceName < b.ResourceName
	case a.Principal != b.Principal:
		return a.Principal < b.Principal
	case a.Host != b.Host:
		return a.Host < b.Host
	case a.Operation != b.Operation:
		return a.Operation < b.Operation
	}
	return a.Permission < b.Permission
}

// All returns every binding, sorted. The caller must not modify it.
func (s *Set) All() []ACL {
	if s == nil {
		return nil
	}
	return s.all
}

// Len is the number of bindings.
func (s *Set) Len() int { return len(s.All()) }

// Contains reports whether the set holds a.
func (s *Set) Contains(a ACL) bool {
	if s == nil {
		return false
	}
	if a.PatternType == Prefixed {
		for _, b := range s.prefixed[a.ResourceType] {
			if b == a {
				return true
			}
		}
		return false
	}
	for _, b := range s.literal[a.ResourceType][a.ResourceName] {
		if b == a {
			return true
		}
	}
	return false
}

// Select returns the bindings f matches, sorted.
func (s *Set) Select(f Filter) []ACL {
	var out []ACL
	for _, a := range s.All() {
		if f.Matches(a) {
			out = append(out, a)
		}
	}
	return out
}

// forResource calls fn for every binding whose pattern applies to the
// resource; fn returns false to stop.
func (s *Set) forResource(rt kmsg.ACLResourceType, name string, fn func(ACL) bool) {
	if s == nil {
		return
	}
	if m := s.literal[rt]; m != nil {
		for _, a := range m[name] {
			if !fn(a) {
				return
			}
		}
		if name != Wildcard {
			for _, a := range m[Wildcard] {
				if !fn(a) {
					return
				}
			}
		}
	}
	for _, a := range s.prefixed[rt] {
		if strings.HasPrefix(name, a.ResourceName) && !fn(a) {
			return
		}
	}
}

// Config is the authorizer's configuration.
type Config struct {
	// SuperUsers are principals ("User:admin") allowed everything.
	SuperUsers map[string]bool
	// AllowEveryoneIfNoACLFound is Kafka's allow.everyone.if.no.acl.found:
	// a resource no binding applies to (for any principal) is open to all.
	AllowEveryoneIfNoACLFound bool
}

// Reason says why a decision was made, for logs and tests.
type Reason string

const (
	ReasonSuperUser   Reason = "super_user"
	ReasonDenied      Reason = "deny_acl"
	ReasonAllowed     Reason = "allow_acl"
	ReasonNoACL       Reason = "no_acl_found"
	ReasonNoMatch     Reason = "no_allow_acl"
	ReasonNoACLOpen   Reason = "no_acl_found_allow_everyone"
	ReasonAnyResource Reason = "allow_acl_on_some_resource"
)

// Authorize is the authorizer's decision, Kafka's rules in order:
//  1. a super user is allowed everything;
//  2. when no binding applies to the resource at all (for any principal),
//     the answer is AllowEveryoneIfNoACLFound;
//  3. a DENY binding for the principal (or User:*) and host (or *) whose
//     operation is op or ALL denies: DENY wins;
//  4. an ALLOW binding allows when its operation is op, ALL, or one that
//     implies op (READ, WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS
//     implies DESCRIBE_CONFIGS);
//  5. anything else is denied.
//
// A binding applies to a resource when its type is the resource's and its
// pattern matches the name (a literal equal or the literal "*", a prefix).
// Pure: it reads only its arguments.
func Authorize(set *Set, cfg Config, principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) (bool, Reason) {
	if cfg.SuperUsers[principal] {
		return true, ReasonSuperUser
	}
	var any, denied, allowed bool
	set.forResource(rt, name, func(a ACL) bool {
		any = true
		if !principalMatches(a.Principal, principal) || !hostMatches(a.Host, host) {
			return true
		}
		if a.Permission == Deny && (a.Operation == op || a.Operation == All) {
			denied = true
			return false
		}
		if a.Permission == Allow && implies(a.Operation, op) {
			allowed = true
		}
		return true
	})
	switch {
	case denied:
		return false, ReasonDenied
	case !any && cfg.AllowEveryoneIfNoACLFound:
		return true, ReasonNoACLOpen
	case !any:
		return false, ReasonNoACL
	case allowed:
		return true, ReasonAllowed
	}
	return false, ReasonNoMatch
}

// AuthorizeAny is Kafka's authorizeByResourceType: may the principal do op
// on some resource of type rt? It is allowed when a super user, when an
// ALLOW binding for the principal and host on some resource of the type is
// not overridden by a DENY for the same principal covering that pattern,
// or (AllowEveryoneIfNoACLFound) when no binding of the type exists.
// Kafka 4 uses it for idempotent producers: IDEMPOTENT_WRITE on the
// cluster or WRITE on any topic. Pure.
func AuthorizeAny(set *Set, cfg Config, principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) (bool, Reason) {
	if cfg.SuperUsers[principal] {
		return true, ReasonSuperUser
	}
	if set == nil || set.types[rt] == 0 {
		if cfg.AllowEveryoneIfNoACLFound {
			return true, ReasonNoACLOpen
		}
		return false, ReasonNoACL
	}
	var denies []ACL
	var allows []ACL
	collect := func(a ACL) {
		if a.ResourceType != rt || !principalMatches(a.Principal, principal) || !hostMatches(a.Host, host) {
			return
		}
		switch {
		case a.Permission == Deny && (a.Operation == op || a.Operation == All):
			denies = append(denies, a)
		case a.Permission == Allow && implies(a.Operation, op):
			allows = append(allows, a)
		}
	}
	for _, a := range set.prefixed[rt] {
		collect(a)
	}
	for _, byName := range set.literal[rt] {
		for _, a := range byName {
			collect(a)
		}
	}
	for _, al := range allows {
		if !coveredBy(al, denies) {
			return true, ReasonAnyResource
		}
	}
	if len(denies) > 0 {
		return false, ReasonDenied
	}
	return false, ReasonNoMatch
}

// coveredBy reports whether some DENY applies to every resource the ALLOW
// pattern al applies to.
func coveredBy(al ACL, denies []ACL) bool {
	for _, d := range denies {
		switch {
		case d.PatternType == Literal && d.ResourceName == Wildcard:
			return true
		case d.PatternType == Prefixed && strings.HasPrefix(al.ResourceName, d.ResourceName):
			return true
		case d.PatternType == Literal && al.PatternType == Literal && d.ResourceName == al.ResourceName:
			return true
		}
	}
	return false
}

func principalMatches(pattern, principal string) bool {
	return pattern == principal || pattern == "User:*"
}

func hostMatches(pattern, host string) bool {
	return pattern == Wildcard || pattern == host
}

// implies reports whether an ALLOW for granted allows op.
func implies(granted, op kmsg.ACLOperation) bool {
	if granted == op || granted == All {
		return true
	}
	switch op {
	case Describe:
		return granted == Read || granted == Write || granted == Delete || granted == Alter
	case DescribeConfigs:
		return granted == AlterConfigs
	}
	return false
}
