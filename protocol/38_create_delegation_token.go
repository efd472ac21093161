package protocol

// CreateDelegationToken: versions 0-3. The requester (authenticated with
// SASL, not with a token) gets a token owned by itself, or from v3 by the
// owner it names, which needs CREATE_TOKENS on that USER (else
// DELEGATION_TOKEN_AUTHORIZATION_FAILED). Owner and renewers must be
// User principals (INVALID_PRINCIPAL_TYPE). The token lives until
// MaxLifetimeMillis (capped by delegation.token.max.lifetime.ms; <= 0: the
// cap) and expires first after delegation.token.expiry.time.ms unless
// renewed. Its id is random, its HMAC is HMAC-SHA512 of the id under
// delegation.token.secret.key. One replicated command; a cluster follower
// forwards the request to the leader.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/users"
)

func init() { register(38, 0, 3, (*Server).createDelegationToken) }

func (s *Server) createDelegationToken(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	req := r.Msg.(*kmsg.CreateDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
	requester := principalOf(r)
	owner := requester
	if req.OwnerPrincipalName != nil && *req.OwnerPrincipalName != "" {
		typ := "User"
		if req.OwnerPrincipalType != nil {
			typ = *req.OwnerPrincipalType
		}
		owner = typ + ":" + *req.OwnerPrincipalName
	}
	resp.PrincipalType, resp.PrincipalName = splitPrincipal(owner)
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = splitPrincipal(requester)
	if err := s.tokenRefusal(r); err != nil {
		resp.ErrorCode = tokenCode(err)
		r.Respond(resp)
		return
	}
	var renewers []string
	for _, rn := range req.Renewers {
		if rn.PrincipalType != "User" {
			resp.ErrorCode = kerr.InvalidPrincipalType.Code
			r.Respond(resp)
			return
		}
		renewers = append(renewers, rn.PrincipalType+":"+rn.PrincipalName)
	}
	if resp.PrincipalType != "User" {
		resp.ErrorCode = kerr.InvalidPrincipalType.Code
		r.Respond(resp)
		return
	}
	if owner != requester && !s.authorized(r, kmsg.ACLOperationCreateTokens, acls.User, owner) {
		resp.ErrorCode = kerr.DelegationTokenAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	cfg := s.tokenCfg
	s.async(r, func() kmsg.Response {
		now := time.Now().UnixMilli()
		life := cfg.MaxLifetimeMs
		if req.MaxLifetimeMillis > 0 {
			life = min(life, req.MaxLifetimeMillis)
		}
		maxTS := now + life
		t, err := users.NewToken(cfg.Secret, owner, requester, renewers, now, min(now+cfg.RenewMs, maxTS), maxTS)
		if err == nil {
			err = s.users.CreateToken(t)
		}
		if err != nil {
			s.log.Warn("delegation token not created", "owner", owner, "err", err)
			resp.ErrorCode = tokenCode(err)
			return resp
		}
		resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = t.Issued, t.Expiry, t.Max
		resp.TokenID, resp.HMAC = t.ID, t.HMAC
		return resp
	})
}
