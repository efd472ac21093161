package protocol

// Authorization: with an authorizer installed (--authorizer acl), every
// handler checks the request's principal (ConnInfo.PrincipalName) against
// the ACLs before acting, with Kafka's operations, resources and error
// codes. Without one (nil), every check is a nil test and allows.

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

// DenialObserver is told of every authorization denial (telemetry/ counts
// them as regent_acl_denials_total and marks the request's span). Its
// method must not block; ctx carries the request's span when it has one.
type DenialObserver interface {
	ACLDenied(ctx context.Context, operation, resourceType string)
}

// SetAuthorizer installs the authorizer (nil: none, everything allowed)
// and where denials are reported (nil: only logged). Call before serving.
func (s *Server) SetAuthorizer(a *acls.Authorizer, obs DenialObserver) {
	s.authz, s.denials = a, obs
}

// Authorizer is the installed authorizer, or nil.
func (s *Server) Authorizer() *acls.Authorizer { return s.authz }

// clientHost is the host part of the request's remote address, which host
// ACLs name.
func clientHost(r *Request) string {
	if r.Conn == nil {
		return ""
	}
	if h, _, err := net.SplitHostPort(r.Conn.RemoteAddr); err == nil {
		return h
	}
	return r.Conn.RemoteAddr
}

func principalOf(r *Request) string { return r.Conn.PrincipalName() }

// authorized reports whether r's principal may do op on the resource. A
// denial is logged and reported. Safe from any goroutine.
func (s *Server) authorized(r *Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if s.authz == nil || byNode(r) {
		return true
	}
	ok, reason := s.authz.Authorize(principalOf(r), clientHost(r), op, rt, name)
	if !ok {
		s.denied(r, op, rt, name, string(reason))
	}
	return ok
}

// authorizedQuiet is authorized without the denial report, for filtering
// listings (Metadata of all topics, ListGroups), where Kafka does not log
// what it leaves out.
func (s *Server) authorizedQuiet(r *Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if s.authz == nil || byNode(r) {
		return true
	}
	ok, _ := s.authz.Authorize(principalOf(r), clientHost(r), op, rt, name)
	return ok
}

// authorizedCluster is authorized on the CLUSTER resource.
func (s *Server) authorizedCluster(r *Request, op kmsg.ACLOperation) bool {
	return s.authorized(r, op, acls.Cluster, acls.ClusterName)
}

// byNode reports whether a cluster node sent r on its own behalf
// (ConnInfo.node): it may do what Kafka's brokers may between themselves,
// and the client request that caused it was authorized where it came in.
func byNode(r *Request) bool { return r.Conn != nil && r.Conn.node }

// authorizedAny reports whether the principal may do op on some resource
// of type rt (Kafka's authorizeByResourceType).
func (s *Server) authorizedAny(r *Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if s.authz == nil || byNode(r) {
		return true
	}
	ok, reason := s.authz.AuthorizeAny(principalOf(r), clientHost(r), op, rt)
	if !ok {
		s.denied(r, op, rt, "", string(reason))
	}
	return ok
}

// denied logs and reports one denial.
func (s *Server) denied(r *Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name, reason string) {
	ctx := r.Context()
	s.log.InfoContext(ctx, "authorization denied",
		"principal", principalOf(r), "host", clientHost(r), "api", kmsg.NameForKey(r.Key),
		"operation", op.String(), "resource_type", rt.String(), "resource", name, "reason", reason)
	if s.denials != nil {
		s.denials.ACLDenied(ctx, op.String(), rt.String())
	}
}

// authorizedOps is the bitfield of ops (Kafka's AuthorizedOperations:
// bit n for AclOperation code n) the principal may do on the resource;
// without an authorizer, all of them.
func (s *Server) authorizedOps(r *Request, rt kmsg.ACLResourceType, name string, ops int32) int32 {
	if s.authz == nil {
		return ops
	}
	var out int32
	for op := kmsg.ACLOperation(0); op < 31; op++ {
		if ops&(1<<op) != 0 && s.authorizedQuiet(r, op, rt, name) {
			out |= 1 << op
		}
	}
	return out
}

// configAuthError is Kafka's check on a config resource: op (DESCRIBE_CONFIGS
// or ALTER_CONFIGS) on the topic, or on the cluster for a broker. nil when
// allowed (or for a resource type the handler refuses anyway).
func (s *Server) configAuthError(r *Request, rt kmsg.ConfigResourceType, name string, op kmsg.ACLOperation) error {
	switch {
	case s.authz == nil:
	case rt == kmsg.ConfigResourceTypeTopic && !s.authorized(r, op, acls.Topic, name):
		return &kerrMsg{kerr.TopicAuthorizationFailed, "not authorized to " + op.String() + " topic '" + name + "'"}
	case rt == kmsg.ConfigResourceTypeBroker && !s.authorizedCluster(r, op):
		return &kerrMsg{kerr.ClusterAuthorizationFailed, "not authorized to " + op.String() + " broker configs"}
	}
	return nil
}
