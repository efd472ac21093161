package protocol

// FindCoordinator: versions 0-6 (v4+ batched CoordinatorKeys). Groups (key
// type 0) and transactional ids (key type 1) are coordinated by the leader
// of the raft group their key is placed on (coordinators.go; the metadata
// group's leader unless the cluster spreads them); share-partition keys
// (type 2) are Kafka's broker-internal lookups and get INVALID_REQUEST.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(10, 0, 6, (*Server).findCoordinator) }

func (s *Server) findCoordinator(r *Request) {
	req := r.Msg.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	var code int16
	var msg *string
	if req.CoordinatorType != 0 && req.CoordinatorType != 1 {
		code = kerr.InvalidRequest.Code
		m := fmt.Sprintf("coordinator key type %d is not served", req.CoordinatorType)
		msg = &m
	}
	if req.Version < 4 {
		coord, c, m := s.coordinatorOf(code, msg, req.CoordinatorKey)
		resp.ErrorCode, resp.ErrorMessage = c, m
		if c == 0 {
			resp.ErrorCode = s.coordinatorAuth(r, req.CoordinatorType, req.CoordinatorKey)
		}
		if resp.ErrorCode == 0 {
			resp.NodeID, resp.Host, resp.Port = coord.ID, coord.Host, coord.Port
		} else {
			resp.NodeID, resp.Port = -1, -1
		}
		r.Respond(resp)
		return
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		var coord BrokerAddr
		coord, c.ErrorCode, c.ErrorMessage = s.coordinatorOf(code, msg, key)
		c.Key = key
		if c.ErrorCode == 0 {
			c.ErrorCode = s.coordinatorAuth(r, req.CoordinatorType, key)
		}
		if c.ErrorCode == 0 {
			c.NodeID, c.Host, c.Port = coord.ID, coord.Host, coord.Port
		} else {
			c.NodeID, c.Port = -1, -1
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	r.Respond(resp)
}

// coordinatorOf is key's coordinator, or why none is named: code and msg
// when the request is refused already, else COORDINATOR_NOT_AVAILABLE
// while the key's raft group has no leader.
func (s *Server) coordinatorOf(code int16, msg *string, key string) (BrokerAddr, int16, *string) {
	if code != 0 {
		return BrokerAddr{}, code, msg
	}
	coord, known := s.broker(s.coordinatorView(key).Leader())
	if !known {
		m := "the coordinator's raft group has no leader yet"
		return BrokerAddr{}, kerr.CoordinatorNotAvailable.Code, &m
	}
	return coord, 0, nil
}

// coordinatorAuth is Kafka's check before naming a coordinator: DESCRIBE on
// the group or the transactional id.
func (s *Server) coordinatorAuth(r *Request, keyType int8, key string) int16 {
	switch {
	case s.authz == nil:
	case keyType == 0 && !s.authorized(r, acls.Describe, acls.Group, key):
		return kerr.GroupAuthorizationFailed.Code
	case keyType == 1 && !s.authorized(r, acls.Describe, acls.TransactionalID, key):
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	return 0
}
