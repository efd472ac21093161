package protocol

// FindCoordinator: versions 0-6 (v4+ batched CoordinatorKeys). Groups (key
// type 0) and transactional ids (key type 1) are coordinated by this node;
// share groups (type 2) are not served and get INVALID_REQUEST.

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
	coord, known := s.broker(s.cluster.Leader())
	if code == 0 && !known {
		code = kerr.CoordinatorNotAvailable.Code
		m := "the cluster has no leader yet"
		msg = &m
	}
	if req.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		if code == 0 {
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
		c.Key, c.ErrorCode, c.ErrorMessage = key, code, msg
		if code == 0 {
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
