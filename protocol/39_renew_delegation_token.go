package protocol

// RenewDelegationToken: versions 0-2. The token with the given HMAC gets
// the expiry now + RenewTimeMillis (negative: delegation.token.expiry.time.ms),
// never past its max. Only its owner, requester or a renewer may
// (DELEGATION_TOKEN_OWNER_MISMATCH); an unknown HMAC is
// DELEGATION_TOKEN_NOT_FOUND, an expired token DELEGATION_TOKEN_EXPIRED.
// A cluster follower forwards the request to the leader.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(39, 0, 2, (*Server).renewDelegationToken) }

func (s *Server) renewDelegationToken(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	req := r.Msg.(*kmsg.RenewDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
	if err := s.tokenRefusal(r); err != nil {
		resp.ErrorCode = tokenCode(err)
		r.Respond(resp)
		return
	}
	principal, renew := principalOf(r), s.tokenCfg.RenewMs
	s.async(r, func() kmsg.Response {
		exp, err := s.users.RenewToken(req.HMAC, principal, req.RenewTimeMillis, renew, time.Now().UnixMilli())
		if err != nil {
			resp.ErrorCode = tokenCode(err)
			return resp
		}
		resp.ExpiryTimestamp = exp
		return resp
	})
}
