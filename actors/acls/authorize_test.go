package acls

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func allow(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation) ACL {
	return ACL{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: Allow}
}

func deny(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation) ACL {
	a := allow(rt, pt, name, principal, host, op)
	a.Permission = Deny
	return a
}

func TestAuthorize(t *testing.T) {
	const alice, bob, host = "User:alice", "User:bob", "10.0.0.1"
	cases := []struct {
		name      string
		acls      []ACL
		cfg       Config
		principal string
		host      string
		op        kmsg.ACLOperation
		rt        kmsg.ACLResourceType
		resource  string
		want      bool
		reason    Reason
	}{
		{name: "super user with no acls", cfg: Config{SuperUsers: map[string]bool{alice: true}}, principal: alice, op: Write, rt: Topic, resource: "t", want: true, reason: ReasonSuperUser},
		{name: "super user beats deny", acls: []ACL{deny(Topic, Literal, "t", alice, "*", All)}, cfg: Config{SuperUsers: map[string]bool{alice: true}}, principal: alice, op: Write, rt: Topic, resource: "t", want: true, reason: ReasonSuperUser},
		{name: "no acl, default closed", principal: alice, op: Read, rt: Topic, resource: "t", want: false, reason: ReasonNoACL},
		{name: "no acl, allow everyone", cfg: Config{AllowEveryoneIfNoACLFound: true}, principal: alice, op: Read, rt: Topic, resource: "t", want: true, reason: ReasonNoACLOpen},
		{name: "acl for another principal closes the resource even when open", acls: []ACL{allow(Topic, Literal, "t", bob, "*", Read)}, cfg: Config{AllowEveryoneIfNoACLFound: true}, principal: alice, op: Read, rt: Topic, resource: "t", want: false, reason: ReasonNoMatch},
		{name: "acl on another resource leaves it open", acls: []ACL{allow(Topic, Literal, "u", bob, "*", Read)}, cfg: Config{AllowEveryoneIfNoACLFound: true}, principal: alice, op: Read, rt: Topic, resource: "t", want: true, reason: ReasonNoACLOpen},
		{name: "literal allow", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Read)}, principal: alice, op: Read, rt: Topic, resource: "t", want: true, reason: ReasonAllowed},
		{name: "literal is exact", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Read)}, principal: alice, op: Read, rt: Topic, resource: "tt", want: false, reason: ReasonNoACL},
		{name: "other operation", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Read)}, principal: alice, op: Write, rt: Topic, resource: "t", want: false, reason: ReasonNoMatch},
		{name: "other resource type", acls: []ACL{allow(Group, Literal, "t", alice, "*", Read)}, principal: alice, op: Read, rt: Topic, resource: "t", want: false, reason: ReasonNoACL},
		{name: "deny wins over allow", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Read), deny(Topic, Literal, "t", alice, "*", Read)}, principal: alice, op: Read, rt: Topic, resource: "t", want: false, reason: ReasonDenied},
		{name: "deny all wins over allow", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Read), deny(Topic, Prefixed, "t", "User:*", "*", All)}, principal: alice, op: Read, rt: Topic, resource: "t", want: false, reason: ReasonDenied},
		{name: "deny on wildcard name wins", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Write), deny(Topic, Literal, "*", alice, "*", Write)}, principal: alice, op: Write, rt: Topic, resource: "t", want: false, reason: ReasonDenied},
		{name: "deny of another operation does not deny", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Read), deny(Topic, Literal, "t", alice, "*", Write)}, principal: alice, op: Read, rt: Topic, resource: "t", want: true, reason: ReasonAllowed},
		{name: "deny is not implied: deny read leaves describe", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Describe), deny(Topic, Literal, "t", alice, "*", Read)}, principal: alice, op: Describe, rt: Topic, resource: "t", want: true, reason: ReasonAllowed},
		{name: "deny for other host", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Read), deny(Topic, Literal, "t", alice, "10.9.9.9", Read)}, principal: alice, host: host, op: Read, rt: Topic, resource: "t", want: true, reason: ReasonAllowed},
		{name: "allow for other host", acls: []ACL{allow(Topic, Literal, "t", alice, "10.9.9.9", Read)}, principal: alice, host: host, op: Read, rt: Topic, resource: "t", want: false, reason: ReasonNoMatch},
		{name: "allow for exact host", acls: []ACL{allow(Topic, Literal, "t", alice, host, Read)}, principal: alice, host: host, op: Read, rt: Topic, resource: "t", want: true, reason: ReasonAllowed},
		{name: "wildcard principal", acls: []ACL{allow(Topic, Literal, "t", "User:*", "*", Read)}, principal: bob, op: Read, rt: Topic, resource: "t", want: true, reason: ReasonAllowed},
		{name: "wildcard resource name", acls: []ACL{allow(Topic, Literal, "*", alice, "*", Write)}, principal: alice, op: Write, rt: Topic, resource: "anything", want: true, reason: ReasonAllowed},
		{name: "prefixed match", acls: []ACL{allow(Topic, Prefixed, "orders-", alice, "*", Read)}, principal: alice, op: Read, rt: Topic, resource: "orders-eu", want: true, reason: ReasonAllowed},
		{name: "prefixed non-match", acls: []ACL{allow(Topic, Prefixed, "orders-", alice, "*", Read)}, principal: alice, op: Read, rt: Topic, resource: "order", want: false, reason: ReasonNoACL},
		{name: "prefixed deny overrides literal allow", acls: []ACL{allow(Topic, Literal, "orders-eu", alice, "*", Read), deny(Topic, Prefixed, "orders", alice, "*", Read)}, principal: alice, op: Read, rt: Topic, resource: "orders-eu", want: false, reason: ReasonDenied},
		{name: "all allows everything", acls: []ACL{allow(Topic, Literal, "t", alice, "*", All)}, principal: alice, op: Delete, rt: Topic, resource: "t", want: true, reason: ReasonAllowed},
		{name: "read implies describe", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Read)}, principal: alice, op: Describe, rt: Topic, resource: "t", want: true, reason: ReasonAllowed},
		{name: "write implies describe", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Write)}, principal: alice, op: Describe, rt: Topic, resource: "t", want: true, reason: ReasonAllowed},
		{name: "delete implies describe", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Delete)}, principal: alice, op: Describe, rt: Topic, resource: "t", want: true, reason: ReasonAllowed},
		{name: "alter implies describe", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Alter)}, principal: alice, op: Describe, rt: Topic, resource: "t", want: true, reason: ReasonAllowed},
		{name: "create does not imply describe", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Create)}, principal: alice, op: Describe, rt: Topic, resource: "t", want: false, reason: ReasonNoMatch},
		{name: "describe does not imply read", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Describe)}, principal: alice, op: Read, rt: Topic, resource: "t", want: false, reason: ReasonNoMatch},
		{name: "alter configs implies describe configs", acls: []ACL{allow(Topic, Literal, "t", alice, "*", AlterConfigs)}, principal: alice, op: DescribeConfigs, rt: Topic, resource: "t", want: true, reason: ReasonAllowed},
		{name: "describe configs does not imply alter configs", acls: []ACL{allow(Topic, Literal, "t", alice, "*", DescribeConfigs)}, principal: alice, op: AlterConfigs, rt: Topic, resource: "t", want: false, reason: ReasonNoMatch},
		{name: "alter configs does not imply describe", acls: []ACL{allow(Topic, Literal, "t", alice, "*", AlterConfigs)}, principal: alice, op: Describe, rt: Topic, resource: "t", want: false, reason: ReasonNoMatch},
		{name: "cluster create", acls: []ACL{allow(Cluster, Literal, ClusterName, alice, "*", Create)}, principal: alice, op: Create, rt: Cluster, resource: ClusterName, want: true, reason: ReasonAllowed},
		{name: "group read", acls: []ACL{allow(Group, Prefixed, "app", alice, "*", Read)}, principal: alice, op: Read, rt: Group, resource: "app-1", want: true, reason: ReasonAllowed},
		{name: "transactional id write", acls: []ACL{allow(TransactionalID, Literal, "tx", alice, "*", Write)}, principal: alice, op: Write, rt: TransactionalID, resource: "tx", want: true, reason: ReasonAllowed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := c.host
			if h == "" {
				h = host
			}
			got, reason := Authorize(NewSet(c.acls), c.cfg, c.principal, h, c.op, c.rt, c.resource)
			if got != c.want || reason != c.reason {
				t.Fatalf("Authorize = %v (%s), want %v (%s)", got, reason, c.want, c.reason)
			}
		})
	}
}

func TestAuthorizeAny(t *testing.T) {
	const alice, host = "User:alice", "10.0.0.1"
	cases := []struct {
		name string
		acls []ACL
		cfg  Config
		want bool
	}{
		{name: "no acls closed", want: false},
		{name: "no acls of the type, open", acls: []ACL{allow(Group, Literal, "g", "User:x", "*", Read)}, cfg: Config{AllowEveryoneIfNoACLFound: true}, want: true},
		{name: "super user", cfg: Config{SuperUsers: map[string]bool{alice: true}}, want: true},
		{name: "write on one topic", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Write)}, want: true},
		{name: "write on a prefix", acls: []ACL{allow(Topic, Prefixed, "p", alice, "*", Write)}, want: true},
		{name: "read only", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Read)}, want: false},
		{name: "someone else's write", acls: []ACL{allow(Topic, Literal, "t", "User:bob", "*", Write)}, want: false},
		{name: "write denied on the same literal", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Write), deny(Topic, Literal, "t", alice, "*", Write)}, want: false},
		{name: "write denied on the wildcard", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Write), deny(Topic, Literal, "*", "User:*", "*", All)}, want: false},
		{name: "write denied on a covering prefix", acls: []ACL{allow(Topic, Prefixed, "orders-eu", alice, "*", Write), deny(Topic, Prefixed, "orders", alice, "*", Write)}, want: false},
		{name: "deny elsewhere leaves an allow", acls: []ACL{allow(Topic, Literal, "t", alice, "*", Write), deny(Topic, Literal, "u", alice, "*", Write)}, want: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, reason := AuthorizeAny(NewSet(c.acls), c.cfg, alice, host, Write, Topic); got != c.want {
				t.Fatalf("AuthorizeAny = %v (%s), want %v", got, reason, c.want)
			}
		})
	}
}

func TestFilterMatches(t *testing.T) {
	name := func(s string) *string { return &s }
	lit := allow(Topic, Literal, "orders", "User:a", "*", Read)
	wild := allow(Topic, Literal, "*", "User:a", "*", Read)
	pre := deny(Topic, Prefixed, "ord", "User:b", "h", Write)
	grp := allow(Group, Literal, "orders", "User:a", "*", Read)
	set := NewSet([]ACL{lit, wild, pre, grp, lit})
	if set.Len() != 4 {
		t.Fatalf("duplicates kept: %d bindings", set.Len())
	}
	any := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	cases := []struct {
		name string
		f    func(Filter) Filter
		want []ACL
	}{
		{name: "any", f: func(f Filter) Filter { return f }, want: []ACL{lit, wild, pre, grp}},
		{name: "topic", f: func(f Filter) Filter { f.ResourceType = Topic; return f }, want: []ACL{lit, wild, pre}},
		{name: "any pattern, exact name", f: func(f Filter) Filter { f.ResourceName = name("orders"); return f }, want: []ACL{lit, grp}},
		{name: "match pattern", f: func(f Filter) Filter {
			f.ResourceType, f.PatternType, f.ResourceName = Topic, kmsg.ACLResourcePatternTypeMatch, name("orders")
			return f
		}, want: []ACL{lit, wild, pre}},
		{name: "literal only", f: func(f Filter) Filter { f.PatternType = Literal; return f }, want: []ACL{lit, wild, grp}},
		{name: "prefixed only", f: func(f Filter) Filter { f.PatternType = Prefixed; return f }, want: []ACL{pre}},
		{name: "principal", f: func(f Filter) Filter { f.Principal = name("User:b"); return f }, want: []ACL{pre}},
		{name: "host", f: func(f Filter) Filter { f.Host = name("h"); return f }, want: []ACL{pre}},
		{name: "operation", f: func(f Filter) Filter { f.Operation = Write; return f }, want: []ACL{pre}},
		{name: "permission", f: func(f Filter) Filter { f.Permission = Allow; return f }, want: []ACL{lit, wild, grp}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := set.Select(c.f(any))
			if len(got) != len(c.want) {
				t.Fatalf("Select = %v, want %v", got, c.want)
			}
			for _, w := range c.want {
				found := false
				for _, g := range got {
					found = found || g == w
				}
				if !found {
					t.Fatalf("Select = %v, missing %v", got, w)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := allow(Topic, Literal, "t", "User:a", "*", Read)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*ACL){
		func(a *ACL) { a.ResourceType = kmsg.ACLResourceTypeAny },
		func(a *ACL) { a.PatternType = kmsg.ACLResourcePatternTypeMatch },
		func(a *ACL) { a.ResourceName = "" },
		func(a *ACL) { a.ResourceType, a.ResourceName = Cluster, "other" },
		func(a *ACL) { a.Principal = "alice" },
		func(a *ACL) { a.Host = "" },
		func(a *ACL) { a.Operation = kmsg.ACLOperationAny },
		func(a *ACL) { a.Permission = kmsg.ACLPermissionTypeAny },
		func(a *ACL) { a.PatternType, a.ResourceName = Prefixed, "*" },
	}
	for i, f := range bad {
		a := ok
		f(&a)
		if a.Validate() == nil {
			t.Errorf("case %d: %v validated", i, a)
		}
	}
}
