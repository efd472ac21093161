package protocol

// DescribeDelegationToken: versions 0-3. Owners null lists every token
// the requester may see, an empty list none; otherwise the tokens owned
// or renewable by one of the owners named. The requester sees a token it
// owns, requested or may renew, one it has DESCRIBE on (resource
// DELEGATION_TOKEN, the token id), and one whose owner it has
// DESCRIBE_TOKENS on (resource USER), as Kafka. HMACs are included, as
// Kafka includes them. Served from this node's replicated copy; expired
// tokens are listed until the leader's periodic pass removes them.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/users"
)

func init() { register(41, 0, 3, (*Server).describeDelegationToken) }

func (s *Server) describeDelegationToken(r *Request) {
	req := r.Msg.(*kmsg.DescribeDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.DescribeDelegationTokenResponse)
	if err := s.tokenRefusal(r); err != nil {
		resp.ErrorCode = tokenCode(err)
		r.Respond(resp)
		return
	}
	if req.Owners != nil && len(req.Owners) == 0 {
		r.Respond(resp)
		return
	}
	requester := principalOf(r)
	for _, t := range s.users.Tokens() {
		if !ownedByAny(t, req.Owners) {
			continue
		}
		if !t.MayChange(requester) &&
			!s.authorizedQuiet(r, kmsg.ACLOperationDescribe, acls.DelegationToken, t.ID) &&
			!s.authorizedQuiet(r, kmsg.ACLOperationDescribeTokens, acls.User, t.Owner) {
			continue
		}
		d := kmsg.NewDescribeDelegationTokenResponseTokenDetail()
		d.PrincipalType, d.PrincipalName = splitPrincipal(t.Owner)
		d.TokenRequesterPrincipalType, d.TokenRequesterPrincipalName = splitPrincipal(t.Requester)
		d.IssueTimestamp, d.ExpiryTimestamp, d.MaxTimestamp = t.Issued, t.Expiry, t.Max
		d.TokenID, d.HMAC = t.ID, t.HMAC
		for _, rn := range t.Renewers {
			x := kmsg.NewDescribeDelegationTokenResponseTokenDetailRenewer()
			x.PrincipalType, x.PrincipalName = splitPrincipal(rn)
			d.Renewers = append(d.Renewers, x)
		}
		resp.TokenDetails = append(resp.TokenDetails, d)
	}
	r.Respond(resp)
}

// ownedByAny reports whether t's owner or one of its renewers is among
// owners (nil: any).
func ownedByAny(t *users.Token, owners []kmsg.DescribeDelegationTokenRequestOwner) bool {
	if owners == nil {
		return true
	}
	for _, o := range owners {
		p := o.PrincipalType + ":" + o.PrincipalName
		if p == t.Owner {
			return true
		}
		for _, rn := range t.Renewers {
			if rn == p {
				return true
			}
		}
	}
	return false
}
