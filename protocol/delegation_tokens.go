package protocol

// Delegation tokens (KIP-48), shared by CreateDelegationToken (38),
// RenewDelegationToken (39), ExpireDelegationToken (40) and
// DescribeDelegationToken (41). The tokens live in the users store
// (actors/users/tokens.go), replicated like SCRAM credentials; a client
// authenticates with one through SCRAM and tokenauth=true
// (protocol/sasl/scram.go).

import (
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TokenConfig configures delegation tokens: Secret is
// delegation.token.secret.key (empty: tokens are off); MaxLifetimeMs and
// RenewMs are delegation.token.max.lifetime.ms and
// delegation.token.expiry.time.ms.
type TokenConfig struct {
	Secret        []byte
	MaxLifetimeMs int64
	RenewMs       int64
}

// SetTokens configures delegation tokens. Call before serving.
func (s *Server) SetTokens(c TokenConfig) { s.tokenCfg = c }

// tokenRefusal is why r may not use the delegation token requests, or
// nil: as Kafka, only a connection authenticated with SASL, and not with
// a token, may; and only with tokens on (a secret key and a store).
func (s *Server) tokenRefusal(r *Request) error {
	switch {
	case !r.Conn.ViaSASL():
		return kerr.DelegationTokenRequestNotAllowed
	case r.Conn.TokenAuth:
		return kerr.DelegationTokenRequestNotAllowed
	case len(s.tokenCfg.Secret) == 0 || s.users == nil:
		return kerr.DelegationTokenAuthDisabled
	}
	return nil
}

// tokenCode is err's Kafka error code (errors the store returns wrap one).
func tokenCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// splitPrincipal splits "Type:Name" (a principal without a type is a
// user's).
func splitPrincipal(p string) (typ, name string) {
	if t, n, ok := strings.Cut(p, ":"); ok {
		return t, n
	}
	return "User", p
}
