// Package sasl holds the broker's SASL mechanisms: PLAIN and SCRAM-SHA-256/
// 512 checked against the SCRAM credential store, and OAUTHBEARER
// validating JWTs against a local JWKS. A Session is one exchange on one
// connection; it does no IO and is driven by the SaslAuthenticate handler
// (or the legacy raw-token framing) one client message at a time.
package sasl

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/xdg-go/scram"

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
	scram map[string]*scram.Server
}

// New checks cfg and makes the authenticator.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{mechs: cfg.Mechanisms, creds: cfg.Credentials, oauth: cfg.OAuth, scram: map[string]*scram.Server{}}
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
				return nil, errors.New("SASL OAUTHBEARER needs a JWKS file (--sasl-oauthbearer-jwks)")
			}
		default:
			return nil, fmt.Errorf("unknown SASL mechanism %q (want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)", m)
		}
	}
	for _, name := range []string{ScramSHA256, ScramSHA512} {
		mech, _ := users.ParseMechanism(name)
		hf := scram.SHA256
		if mech == users.ScramSHA512 {
			hf = scram.SHA512
		}
		srv, err := hf.NewServer(func(user string) (scram.StoredCredentials, error) {
			c, ok := a.creds.Lookup(user, mech)
			if !ok {
				return scram.StoredCredentials{}, errUnknownUser
			}
			return scram.StoredCredentials{
				KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
				StoredKey:  c.StoredKey, ServerKey: c.ServerKey,
			}, nil
		})
		if err != nil {
			return nil, fmt.Errorf("SCRAM server: %w", err)
		}
		a.scram[name] = srv
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
		return &scramSession{mech: mech, conv: a.scram[mech].NewConversation()}, nil
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

var errUnknownUser = errors.New("unknown user")

// badCredentials is the message for a wrong user or password: the same
// either way, so a client cannot tell which names exist.
func badCredentials(mech, reason string, err error) *Failure {
	return &Failure{Reason: reason, Msg: fmt.Sprintf("Authentication failed: invalid credentials with SASL mechanism %s", mech), Err: err}
}

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

// scramSession runs RFC 5802's exchange with xdg-go/scram's server: the
// client-first message, then the client-final one.
type scramSession struct {
	mech      string
	conv      *scram.ServerConversation
	principal string
}

func (s *scramSession) Step(msg []byte, _ time.Time) ([]byte, bool, error) {
	if s.conv.Done() {
		return nil, true, &Failure{Reason: "malformed", Msg: "SCRAM exchange already complete"}
	}
	reply, err := s.conv.Step(string(msg))
	if err != nil {
		reason := "malformed"
		switch {
		case errors.Is(err, errUnknownUser):
			reason = "unknown_user"
		case strings.HasPrefix(reply, scram.ErrInvalidProof):
			reason = "bad_password"
		}
		return nil, true, badCredentials(s.mech, reason, err)
	}
	if !s.conv.Done() {
		return []byte(reply), false, nil
	}
	if !s.conv.Valid() {
		return nil, true, badCredentials(s.mech, "bad_password", nil)
	}
	// An authorization id other than the user is not served (Kafka
	// refuses it too, except for delegation tokens).
	if az := s.conv.AuthzID(); az != "" && az != s.conv.Username() {
		return nil, true, &Failure{Reason: "authorization_id", Msg: "Authentication failed: SCRAM authorization id must be empty or the user name"}
	}
	s.principal = "User:" + s.conv.Username()
	return []byte(reply), true, nil
}

func (s *scramSession) Principal() string { return s.principal }
func (s *scramSession) Expiry() time.Time { return time.Time{} }
