// Package acls is the broker's access control: Kafka's ACL model, the
// authorizer's decision (a pure function of the ACL set, the principal, the
// host, the operation and the resource) and the replicated ACL store that
// CreateAcls, DescribeAcls and DeleteAcls manage.
//
// The model is Kafka's, with kmsg's enums so that codes travel unchanged:
// an ACL binds a resource pattern (type, name, LITERAL or PREFIXED) to an
// entry (principal "User:NAME" or "User:*", host or "*", operation, ALLOW
// or DENY). Filters (DescribeAcls, DeleteAcls) also take ANY and MATCH.
package acls

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Resource types, pattern types, operations and permissions, renamed for
// reading; the values are Kafka's wire codes.
const (
	Topic           = kmsg.ACLResourceTypeTopic
	Group           = kmsg.ACLResourceTypeGroup
	Cluster         = kmsg.ACLResourceTypeCluster
	TransactionalID = kmsg.ACLResourceTypeTransactionalId
	DelegationToken = kmsg.ACLResourceTypeDelegationToken
	User            = kmsg.ACLResourceTypeUser

	Literal  = kmsg.ACLResourcePatternTypeLiteral
	Prefixed = kmsg.ACLResourcePatternTypePrefixed

	All             = kmsg.ACLOperationAll
	Read            = kmsg.ACLOperationRead
	Write           = kmsg.ACLOperationWrite
	Create          = kmsg.ACLOperationCreate
	Delete          = kmsg.ACLOperationDelete
	Alter           = kmsg.ACLOperationAlter
	Describe        = kmsg.ACLOperationDescribe
	ClusterAction   = kmsg.ACLOperationClusterAction
	DescribeConfigs = kmsg.ACLOperationDescribeConfigs
	AlterConfigs    = kmsg.ACLOperationAlterConfigs
	IdempotentWrite = kmsg.ACLOperationIdempotentWrite

	Allow = kmsg.ACLPermissionTypeAllow
	Deny  = kmsg.ACLPermissionTypeDeny
)

// ClusterName is the one name a CLUSTER resource has.
const ClusterName = "kafka-cluster"

// Wildcard is the resource name, principal ("User:*") and host that match
// everything.
const Wildcard = "*"

// ACL is one binding. Its zero value is not valid; see Validate.
type ACL struct {
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	ResourceName string                      `json:"resource_name"`
	PatternType  kmsg.ACLResourcePatternType `json:"pattern_type"`
	Principal    string                      `json:"principal"`
	Host         string                      `json:"host"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

func (a ACL) String() string {
	return fmt.Sprintf("(%s:%s:%s %s %s from %s on %s)", a.ResourceType, a.PatternType, a.ResourceName, a.Permission, a.Operation, a.Host, a.Principal)
}

// Validate checks a binding to create as Kafka does: concrete types (no
// ANY, MATCH or UNKNOWN), a "Type:Name" principal, a host, a non-empty
// resource name, CLUSTER named kafka-cluster.
func (a ACL) Validate() error {
	switch a.ResourceType {
	case Topic, Group, Cluster, TransactionalID, DelegationToken, User:
	default:
		return fmt.Errorf("resource type %s is not one an ACL can be created for", a.ResourceType)
	}
	if a.PatternType != Literal && a.PatternType != Prefixed {
		return fmt.Errorf("pattern type %s is not one an ACL can be created with (LITERAL or PREFIXED)", a.PatternType)
	}
	if a.ResourceName == "" {
		return fmt.Errorf("resource name is empty")
	}
	if a.ResourceType == Cluster && (a.PatternType != Literal || a.ResourceName != ClusterName) {
		return fmt.Errorf("a CLUSTER resource is the literal name %q", ClusterName)
	}
	if a.PatternType == Prefixed && a.ResourceName == Wildcard {
		return fmt.Errorf("a PREFIXED pattern cannot be the wildcard %q (use LITERAL)", Wildcard)
	}
	if typ, name, ok := strings.Cut(a.Principal, ":"); !ok || typ == "" || name == "" {
		return fmt.Errorf("principal %q is not of the form Type:Name", a.Principal)
	}
	if a.Host == "" {
		return fmt.Errorf("host is empty (use %q for any host)", Wildcard)
	}
	if a.Operation <= kmsg.ACLOperationAny || a.Operation > kmsg.ACLOperationDescribeTokens {
		return fmt.Errorf("operation %s is not one an ACL can be created for", a.Operation)
	}
	if a.Permission != Allow && a.Permission != Deny {
		return fmt.Errorf("permission %s is not ALLOW or DENY", a.Permission)
	}
	return nil
}

// Filter selects bindings (DescribeAcls, DeleteAcls). A nil name,
// principal or host matches any; ANY matches any type, operation or
// permission; pattern type MATCH selects the bindings that would apply to
// the named resource (the literal name, the literal wildcard and the
// prefixes of the name).
type Filter struct {
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	ResourceName *string                     `json:"resource_name,omitempty"`
	PatternType  kmsg.ACLResourcePatternType `json:"pattern_type"`
	Principal    *string                     `json:"principal,omitempty"`
	Host         *string                     `json:"host,omitempty"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

// Validate refuses filters with UNKNOWN in them, as Kafka does.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType == kmsg.ACLResourceTypeUnknown || f.ResourceType > User:
		return fmt.Errorf("resource type %s cannot be filtered on", f.ResourceType)
	case f.PatternType == kmsg.ACLResourcePatternTypeUnknown || f.PatternType > Prefixed:
		return fmt.Errorf("pattern type %s cannot be filtered on", f.PatternType)
	case f.Operation == kmsg.ACLOperationUnknown || f.Operation > kmsg.ACLOperationDescribeTokens:
		return fmt.Errorf("operation %s cannot be filtered on", f.Operation)
	case f.Permission == kmsg.ACLPermissionTypeUnknown || f.Permission > Allow:
		return fmt.Errorf("permission %s cannot be filtered on", f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects a, with Kafka's
// ResourcePatternFilter and AccessControlEntryFilter rules.
func (f Filter) Matches(a ACL) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != a.ResourceType {
		return false
	}
	if f.PatternType != kmsg.ACLResourcePatternTypeAny && f.PatternType != kmsg.ACLResourcePatternTypeMatch && f.PatternType != a.PatternType {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		if f.PatternType == kmsg.ACLResourcePatternTypeMatch {
			if !patternMatches(a.PatternType, a.ResourceName, name) {
				return false
			}
		} else if name != a.ResourceName {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != a.Principal {
		return false
	}
	if f.Host != nil && *f.Host != a.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != a.Operation {
		return false
	}
	return f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == a.Permission
}

// patternMatches reports whether a pattern applies to the resource name:
// a literal by equality or the wildcard, a prefix by prefix.
func patternMatches(pt kmsg.ACLResourcePatternType, pattern, name string) bool {
	switch pt {
	case Literal:
		return pattern == name || pattern == Wildcard
	case Prefixed:
		return strings.HasPrefix(name, pattern)
	}
	return false
}
