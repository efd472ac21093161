package acls

import (
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Set is an immutable, indexed set of bindings: a check looks up the
// resource's literal name and the literal wildcard, then the prefixes of
// its type, each split by principal, so it touches only the bindings of the
// principal (and User:*) and never the whole set. Build one with NewSet;
// never mutate it.
type Set struct {
	all []ACL // sorted (see less), no duplicates
	// literal[type][name] holds the LITERAL bindings of a name.
	literal map[kmsg.ACLResourceType]map[string]*bucket
	// prefixed[type] holds the PREFIXED bindings of a type.
	prefixed map[kmsg.ACLResourceType]*prefixes
	// types counts the bindings of each resource type (AuthorizeAny).
	types map[kmsg.ACLResourceType]int
}

// bucket is the bindings of one literal resource, by principal.
type bucket struct {
	byPrincipal map[string][]ACL
}

// prefixes is the PREFIXED bindings of one resource type, by prefix; a
// lookup tries the name's prefixes of each length some binding has (few,
// in practice), one map lookup each.
type prefixes struct {
	lengths []int // distinct prefix lengths, ascending
	byName  map[string]*bucket
}

// NewSet indexes acls (duplicates dropped). acls is not retained.
func NewSet(acls []ACL) *Set {
	s := &Set{literal: map[kmsg.ACLResourceType]map[string]*bucket{}, prefixed: map[kmsg.ACLResourceType]*prefixes{}, types: map[kmsg.ACLResourceType]int{}}
	all := append([]ACL(nil), acls...)
	sort.Slice(all, func(i, j int) bool { return less(all[i], all[j]) })
	for i, a := range all {
		if i > 0 && all[i-1] == a {
			continue
		}
		s.all = append(s.all, a)
		s.types[a.ResourceType]++
		if a.PatternType == Prefixed {
			px := s.prefixed[a.ResourceType]
			if px == nil {
				px = &prefixes{byName: map[string]*bucket{}}
				s.prefixed[a.ResourceType] = px
			}
			b := px.byName[a.ResourceName]
			if b == nil {
				b = &bucket{byPrincipal: map[string][]ACL{}}
				px.byName[a.ResourceName] = b
				if !slices.Contains(px.lengths, len(a.ResourceName)) {
					px.lengths = append(px.lengths, len(a.ResourceName))
					slices.Sort(px.lengths)
				}
			}
			b.byPrincipal[a.Principal] = append(b.byPrincipal[a.Principal], a)
			continue
		}
		m := s.literal[a.ResourceType]
		if m == nil {
			m = map[string]*bucket{}
			s.literal[a.ResourceType] = m
		}
		b := m[a.ResourceName]
		if b == nil {
			b = &bucket{byPrincipal: map[string][]ACL{}}
			m[a.ResourceName] = b
		}
		b.byPrincipal[a.Principal] = append(b.byPrincipal[a.Principal], a)
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
	var list []ACL
	if a.PatternType == Prefixed {
		if px := s.prefixed[a.ResourceType]; px != nil && px.byName[a.ResourceName] != nil {
			list = px.byName[a.ResourceName].byPrincipal[a.Principal]
		}
	} else if b := s.literal[a.ResourceType][a.ResourceName]; b != nil {
		list = b.byPrincipal[a.Principal]
	}
	for _, x := range list {
		if x == a {
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

// forResource calls fn for every binding of principal (or User:*) whose
// pattern applies to the resource; fn returns false to stop. It reports
// whether any binding at all (of any principal) applies to the resource.
func (s *Set) forResource(rt kmsg.ACLResourceType, name, principal string, fn func(ACL) bool) (any bool) {
	if s == nil {
		return false
	}
	each := func(list []ACL) bool {
		for _, a := range list {
			if !fn(a) {
				return false
			}
		}
		return true
	}
	if m := s.literal[rt]; m != nil {
		for _, n := range [2]string{name, Wildcard} {
			b := m[n]
			if b == nil || (n == Wildcard && name == Wildcard) {
				continue
			}
			any = true
			if !each(b.byPrincipal[principal]) || !each(b.byPrincipal[wildcardPrincipal]) {
				return any
			}
		}
	}
	px := s.prefixed[rt]
	if px == nil {
		return any
	}
	for _, n := range px.lengths {
		if n > len(name) {
			break
		}
		if b := px.byName[name[:n]]; b != nil {
			any = true
			if !each(b.byPrincipal[principal]) || !each(b.byPrincipal[wildcardPrincipal]) {
				return any
			}
		}
	}
	return any
}

// wildcardPrincipal is the principal of bindings for everyone.
const wildcardPrincipal = "User:*"

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
	var denied, allowed bool
	any := set.forResource(rt, name, principal, func(a ACL) bool {
		if !hostMatches(a.Host, host) {
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
	for _, a := range set.all {
		collect(a)
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
	return pattern == principal || pattern == wildcardPrincipal
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
