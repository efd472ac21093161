// Package sasl holds the broker's SASL mechanisms: PLAIN and SCRAM-SHA-256/
// 512 checked against the SCRAM credential store, and OAUTHBEARER
// validating JWTs against a local JWKS or, when opted into, accepting
// unsecured ("alg":"none") tokens as Kafka's default validator does. A Session is one exchange on one
// connection; it does no IO and is driven by the SaslAuthenticate handler
// (or the legacy raw-token framing) one client message at a time.
package sasl

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/regent-broker/regent/actors/users"
)

// Mechanism names as clients send them in SaslHandshake.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
)

// DefaultMechanisms are enabled on SASL listeners unless configured.
var DefaultMechanisms = []string{Plain, ScramSHA256, ScramSHA512}

// Credentials looks up SCRAM credentials (the users store).
type Credentials interface {
	Lookup(user string, m users.Mechanism) (users.Credential, bool)
}

// TokenCredentials looks up delegation tokens' SCRAM credentials (the
// users store): the token id's credential for m, the token's owner
// principal and its expiry (Unix ms), if it exists and has not expired at
// now (Unix ms). A Credentials that does not implement it refuses
// tokenauth=true.
type TokenCredentials interface {
	LookupToken(id string, m users.Mechanism, now int64) (owner string, cred users.Credential, expiry int64, ok bool)
}

// Config configures the mechanisms.
type Config struct {
	// Mechanisms enabled; empty: DefaultMechanisms.
	Mechanisms []string
	// Credentials backs PLAIN and SCRAM; required when either is enabled.
	Credentials Credentials
	// OAuth validates OAUTHBEARER tokens; required when it is enabled.
	OAuth *OAuthValidator
}

// Authenticator starts sessions for the enabled mechanisms. Safe for
// concurrent use.
type Authenticator struct {
	mechs []string
	creds Credentials
	oauth *OAuthValidator
}

// New checks cfg and makes the authenticator.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{mechs: cfg.Mechanisms, creds: cfg.Credentials, oauth: cfg.OAuth}
	if len(a.mechs) == 0 {
		a.mechs = DefaultMechanisms
	}
	for _, m := range a.mechs {
		switch m {
		case Plain, ScramSHA256, ScramSHA512:
			if a.creds == nil {
				return nil, fmt.Errorf("SASL %s needs the SCRAM credential store", m)
			}
		case OAuthBearer:
			if a.oauth == nil {
				return nil, errors.New("SASL OAUTHBEARER needs a token validator (--sasl-oauthbearer-jwks or --sasl-oauthbearer-unsecured)")
			}
		default:
			return nil, fmt.Errorf("unknown SASL mechanism %q (want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)", m)
		}
	}
	return a, nil
}

// Mechanisms lists the enabled mechanisms.
func (a *Authenticator) Mechanisms() []string { return slices.Clone(a.mechs) }

// Enabled reports whether mech is enabled.
func (a *Authenticator) Enabled(mech string) bool { return slices.Contains(a.mechs, mech) }

// Start begins an exchange for mech, which must be enabled.
func (a *Authenticator) Start(mech string) (Session, error) {
	if !a.Enabled(mech) {
		return nil, fmt.Errorf("SASL mechanism %q is not enabled", mech)
	}
	switch mech {
	case Plain:
		return &plainSession{creds: a.creds}, nil
	case ScramSHA256, ScramSHA512:
		return newScramSession(mech, a.creds), nil
	case OAuthBearer:
		return &oauthSession{v: a.oauth}, nil
	}
	return nil, fmt.Errorf("SASL mechanism %q is not served", mech)
}

// Session is one authentication exchange. Not safe for concurrent use.
type Session interface {
	// Step takes the client's next message and returns the server's
	// reply. done says the exchange is over: with err nil, the client is
	// authenticated as Principal. An error is a *Failure.
	Step(msg []byte, now time.Time) (reply []byte, done bool, err error)
	// Principal is "User:NAME" once the exchange succeeded.
	Principal() string
	// Expiry bounds the session (an OAUTHBEARER token's exp); zero: none.
	Expiry() time.Time
}

// Failure is a refused authentication: Reason is a short label for
// metrics (unknown_user, bad_password, bad_token, malformed, ...), Msg
// what the client is told.
type Failure struct {
	Reason string
	Msg    string
	Err    error // the underlying cause, for logs (nil: none)
}

func (f *Failure) Error() string {
	if f.Err != nil {
		return f.Msg + ": " + f.Err.Error()
	}
	return f.Msg
}

func (f *Failure) Unwrap() error { return f.Err }

// ReasonOf is err's Failure reason, "error" for other errors.
func ReasonOf(err error) string {
	var f *Failure
	if errors.As(err, &f) {
		return f.Reason
	}
	return "error"
}

// badCredentials is the message for a wrong user or password: the same
// either way, so a client cannot tell which names exist.
func badCredentials(mech, reason string, err error) *Failure {
	return &Failure{Reason: reason, Msg: fmt.Sprintf("Authentication failed: invalid credentials with SASL mechanism %s", mech), Err: err}
}

// decoy is salted for unknown PLAIN users (never matches: empty keys).
var decoy = users.Credential{Mechanism: users.ScramSHA512, Salt: []byte("regent-decoy-salt"), Iterations: users.MinIterations}

// plainSession checks "authzid\0user\0password" (RFC 4616) against the
// user's stored SCRAM credential: the password is salted with the stored
// salt and iterations and the keys compared, so passwords are never stored.
type plainSession struct {
	creds     Credentials
	principal string
}

func (p *plainSession) Step(msg []byte, _ time.Time) ([]byte, bool, error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, true, &Failure{Reason: "malformed", Msg: "Invalid SASL/PLAIN message: want authzid NUL user NUL password"}
	}
	authz, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || pass == "" {
		return nil, true, &Failure{Reason: "malformed", Msg: "Invalid SASL/PLAIN message: empty user or password"}
	}
	if authz != "" && authz != user {
		return nil, true, &Failure{Reason: "authorization_id", Msg: "Authentication failed: SASL/PLAIN authorization id must be empty or the user name"}
	}
	// The strongest stored credential; either derives the same check.
	c, ok := p.creds.Lookup(user, users.ScramSHA512)
	if !ok {
		c, ok = p.creds.Lookup(user, users.ScramSHA256)
	}
	if !ok {
		// The same salting work as a known user's, so the answer's time
		// does not tell which names exist.
		decoy.Verify(pass)
		return nil, true, badCredentials(Plain, "unknown_user", nil)
	}
	if !c.Verify(pass) {
		return nil, true, badCredentials(Plain, "bad_password", nil)
	}
	p.principal = "User:" + user
	return nil, true, nil
}

func (p *plainSession) Principal() string { return p.principal }
func (p *plainSession) Expiry() time.Time { return time.Time{} }
