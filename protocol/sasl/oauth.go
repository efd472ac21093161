package sasl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// OAuthConfig configures OAUTHBEARER token validation.
type OAuthConfig struct {
	// JWKSFile is a JSON Web Key Set whose public keys sign valid tokens.
	JWKSFile string
	// Issuer, when set, must equal the token's iss claim.
	Issuer string
	// Audience, when set, must be among the token's aud values.
	Audience string
	// ClockSkew is the leeway on exp, nbf and iat (default 30 s, Kafka's
	// sasl.oauthbearer.clock.skew.seconds).
	ClockSkew time.Duration
}

// OAuthValidator checks JWTs: signature by a key of the JWKS (chosen by
// the token's kid, or the only key when there is one), exp required and
// not past, nbf, iss and aud, and a non-empty sub, which is the principal.
type OAuthValidator struct {
	// keys is the JWKS in use, replaced whole by Reload; read lock-free.
	keys atomic.Pointer[jose.JSONWebKeySet]
	cfg  OAuthConfig
}

// signatureAlgs are the asymmetric algorithms accepted: a JWKS of public
// keys cannot check HMAC tokens, and "none" is never accepted.
var signatureAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// NewOAuthValidator loads the JWKS file.
func NewOAuthValidator(cfg OAuthConfig) (*OAuthValidator, error) {
	v := &OAuthValidator{cfg: cfg}
	if v.cfg.ClockSkew <= 0 {
		v.cfg.ClockSkew = 30 * time.Second
	}
	if err := v.Reload(); err != nil {
		return nil, err
	}
	return v, nil
}

// Reload reads the JWKS file again (key rotation); on error the keys in
// use are kept. Safe while tokens are validated.
func (v *OAuthValidator) Reload() error {
	raw, err := os.ReadFile(v.cfg.JWKSFile)
	if err != nil {
		return fmt.Errorf("read JWKS: %w", err)
	}
	var ks jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &ks); err != nil {
		return fmt.Errorf("parse JWKS %s: %w", v.cfg.JWKSFile, err)
	}
	if len(ks.Keys) == 0 {
		return fmt.Errorf("JWKS %s holds no keys", v.cfg.JWKSFile)
	}
	for _, k := range ks.Keys {
		if !k.IsPublic() {
			return fmt.Errorf("JWKS %s: key %q is not a public key", v.cfg.JWKSFile, k.KeyID)
		}
	}
	v.keys.Store(&ks)
	return nil
}

// Validate checks token at now and returns its subject and expiry.
func (v *OAuthValidator) Validate(token string, now time.Time) (sub string, exp time.Time, err error) {
	tok, err := jwt.ParseSigned(token, signatureAlgs)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("parse token: %w", err)
	}
	if len(tok.Headers) != 1 {
		return "", time.Time{}, errors.New("token must carry one signature")
	}
	keys := v.keys.Load()
	var key *jose.JSONWebKey
	if kid := tok.Headers[0].KeyID; kid != "" {
		if ks := keys.Key(kid); len(ks) > 0 {
			key = &ks[0]
		}
	} else if len(keys.Keys) == 1 {
		key = &keys.Keys[0]
	}
	if key == nil {
		return "", time.Time{}, fmt.Errorf("no key %q in the JWKS", tok.Headers[0].KeyID)
	}
	var c jwt.Claims
	if err := tok.Claims(key.Key, &c); err != nil {
		return "", time.Time{}, fmt.Errorf("verify token: %w", err)
	}
	if c.Expiry == nil {
		return "", time.Time{}, errors.New("token has no exp claim")
	}
	want := jwt.Expected{Issuer: v.cfg.Issuer, Time: now}
	if v.cfg.Audience != "" {
		want.AnyAudience = jwt.Audience{v.cfg.Audience}
	}
	if err := c.ValidateWithLeeway(want, v.cfg.ClockSkew); err != nil {
		return "", time.Time{}, err
	}
	if c.Subject == "" {
		return "", time.Time{}, errors.New("token has no sub claim")
	}
	return c.Subject, c.Expiry.Time(), nil
}

// oauthSession reads RFC 7628's client first message,
// "n,[a=authzid],\x01auth=Bearer TOKEN\x01[key=value\x01]*\x01", and
// validates the token. A refused token fails the exchange at once with
// SASL_AUTHENTICATION_FAILED and a message, rather than sending RFC 7628's
// error challenge and waiting for the client's \x01: Kafka's clients and
// franz-go treat either as failure, and this saves a round trip.
type oauthSession struct {
	v         *OAuthValidator
	principal string
	expiry    time.Time
}

func (o *oauthSession) Step(msg []byte, now time.Time) ([]byte, bool, error) {
	token, authz, err := parseOAuthFirst(msg)
	if err != nil {
		return nil, true, &Failure{Reason: "malformed", Msg: "Invalid OAUTHBEARER message", Err: err}
	}
	sub, exp, err := o.v.Validate(token, now)
	if err != nil {
		return nil, true, &Failure{Reason: "bad_token", Msg: "Authentication failed: OAUTHBEARER token refused (invalid_token)", Err: err}
	}
	if authz != "" && authz != sub {
		return nil, true, &Failure{Reason: "authorization_id", Msg: "Authentication failed: OAUTHBEARER authorization id must be empty or the token's subject"}
	}
	o.principal, o.expiry = "User:"+sub, exp
	return nil, true, nil
}

func (o *oauthSession) Principal() string { return o.principal }
func (o *oauthSession) Expiry() time.Time { return o.expiry }

// parseOAuthFirst returns the bearer token and the authorization id of an
// RFC 7628 client first message.
func parseOAuthFirst(msg []byte) (token, authz string, err error) {
	gs2, rest, ok := bytes.Cut(msg, []byte{1})
	if !ok {
		return "", "", errors.New("no kvpairs")
	}
	fields := strings.Split(string(gs2), ",")
	if len(fields) != 3 || fields[0] != "n" || fields[2] != "" {
		return "", "", fmt.Errorf("bad GS2 header %q (channel binding is not supported)", gs2)
	}
	if a, ok := strings.CutPrefix(fields[1], "a="); ok {
		authz = a
	} else if fields[1] != "" {
		return "", "", fmt.Errorf("bad GS2 header %q", gs2)
	}
	if !bytes.HasSuffix(rest, []byte{1}) {
		return "", "", errors.New("kvpairs not terminated")
	}
	for _, kv := range strings.Split(string(rest[:len(rest)-1]), "\x01") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return "", "", fmt.Errorf("bad kvpair %q", kv)
		}
		if k == "auth" {
			scheme, tok, ok := strings.Cut(v, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
				return "", "", errors.New("auth is not a Bearer token")
			}
			token = tok
		}
	}
	if token == "" {
		return "", "", errors.New("no auth kvpair")
	}
	return token, authz, nil
}
