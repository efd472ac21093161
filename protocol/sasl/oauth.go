package sasl

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// OAuthConfig configures OAUTHBEARER token validation: either signed
// tokens checked against a JWKS, or, with Unsecured, Kafka's default
// unsecured validator (OAuthBearerUnsecuredValidatorCallbackHandler).
// Both run the same claim checks.
type OAuthConfig struct {
	// JWKSFile is a JSON Web Key Set whose public keys sign valid tokens.
	// Required unless Unsecured; refused with it.
	JWKSFile string
	// Unsecured accepts unsecured JWS tokens ({"alg":"none"}, empty
	// signature) and nothing else: anyone can mint any principal, so it
	// is for tests and development only, as Kafka's default validator is.
	Unsecured bool
	// Issuer, when set, must equal the token's iss claim.
	Issuer string
	// Audience, when set, must be among the token's aud values.
	Audience string
	// PrincipalClaim names the string claim that is the principal
	// (default "sub"; Kafka's sasl.oauthbearer.sub.claim.name and
	// unsecuredValidatorPrincipalClaimName).
	PrincipalClaim string
	// ScopeClaim names the scope claim, a space-separated string or a
	// list of strings (default "scope").
	ScopeClaim string
	// RequiredScope lists scopes the token must all carry; empty: none
	// (Kafka's unsecuredValidatorRequiredScope).
	RequiredScope []string
	// ClockSkew is the leeway on exp, nbf and iat (default 30 s, Kafka's
	// sasl.oauthbearer.clock.skew.seconds).
	ClockSkew time.Duration
}

// OAuthValidator checks JWTs: the signature by a key of the JWKS (chosen
// by the token's kid, or the only key when there is one), or, in the
// unsecured mode, that the token is an unsecured JWS; then, either way,
// exp required and not past, nbf and iat not in the future, exp after
// iat, iss and aud, the required scopes, and a non-empty principal claim.
type OAuthValidator struct {
	// keys is the JWKS in use, replaced whole by Reload; read lock-free.
	// Nil in the unsecured mode.
	keys atomic.Pointer[jose.JSONWebKeySet]
	cfg  OAuthConfig
}

// signatureAlgs are the asymmetric algorithms accepted with a JWKS: a JWKS
// of public keys cannot check HMAC tokens, and "none" is only accepted in
// the unsecured mode.
var signatureAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// errInsufficientScope marks a token refused for its scope: RFC 6750's
// insufficient_scope rather than invalid_token.
var errInsufficientScope = errors.New("insufficient scope")

// NewOAuthValidator checks cfg and loads the JWKS file, if any.
func NewOAuthValidator(cfg OAuthConfig) (*OAuthValidator, error) {
	v := &OAuthValidator{cfg: cfg}
	if v.cfg.ClockSkew <= 0 {
		v.cfg.ClockSkew = 30 * time.Second
	}
	if v.cfg.PrincipalClaim == "" {
		v.cfg.PrincipalClaim = "sub"
	}
	if v.cfg.ScopeClaim == "" {
		v.cfg.ScopeClaim = "scope"
	}
	switch {
	case cfg.Unsecured && cfg.JWKSFile != "":
		return nil, errors.New("a JWKS and the unsecured mode exclude each other: signed tokens or unsecured ones, not both")
	case cfg.Unsecured:
		return v, nil
	case cfg.JWKSFile == "":
		return nil, errors.New("no JWKS file to check token signatures with")
	}
	if err := v.Reload(); err != nil {
		return nil, err
	}
	return v, nil
}

// Unsecured reports whether tokens are accepted without a signature.
func (v *OAuthValidator) Unsecured() bool { return v.cfg.Unsecured }

// Reload reads the JWKS file again (key rotation); on error the keys in
// use are kept. Safe while tokens are validated.
func (v *OAuthValidator) Reload() error {
	if v.cfg.Unsecured {
		return errors.New("the unsecured OAUTHBEARER mode has no JWKS to reload")
	}
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

// Validate checks token at now and returns its principal name and expiry.
func (v *OAuthValidator) Validate(token string, now time.Time) (principal string, exp time.Time, err error) {
	var payload []byte
	if v.cfg.Unsecured {
		payload, err = unsecuredPayload(token)
	} else {
		payload, err = v.verifiedPayload(token)
	}
	if err != nil {
		return "", time.Time{}, err
	}
	return v.checkClaims(payload, now)
}

// verifiedPayload checks token's signature against the JWKS and returns
// its claims set.
func (v *OAuthValidator) verifiedPayload(token string) ([]byte, error) {
	sig, err := jose.ParseSignedCompact(token, signatureAlgs)
	if err != nil {
		return nil, fmt.Errorf("parse token: %w", err)
	}
	kid := sig.Signatures[0].Header.KeyID
	keys := v.keys.Load()
	var key *jose.JSONWebKey
	if kid != "" {
		if ks := keys.Key(kid); len(ks) > 0 {
			key = &ks[0]
		}
	} else if len(keys.Keys) == 1 {
		key = &keys.Keys[0]
	}
	if key == nil {
		return nil, fmt.Errorf("no key %q in the JWKS", kid)
	}
	payload, err := sig.Verify(key.Key)
	if err != nil {
		return nil, fmt.Errorf("verify token: %w", err)
	}
	return payload, nil
}

// unsecuredPayload returns the claims set of an unsecured JWS (RFC 7515
// compact form with {"alg":"none"} and an empty signature), as Kafka's
// OAuthBearerUnsecuredJws reads it; any other token is refused.
func unsecuredPayload(token string) ([]byte, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("parse token: want 3 dot-separated parts, got %d", len(parts))
	}
	hdr, err := decodeSegment(parts[0])
	if err != nil {
		return nil, fmt.Errorf("parse token header: %w", err)
	}
	var h struct {
		Alg *string `json:"alg"`
	}
	if err := json.Unmarshal(hdr, &h); err != nil {
		return nil, fmt.Errorf("parse token header: %w", err)
	}
	if h.Alg == nil || *h.Alg != "none" {
		alg := "(missing)"
		if h.Alg != nil {
			alg = *h.Alg
		}
		return nil, fmt.Errorf("token alg %s refused: the unsecured mode takes only alg none", alg)
	}
	if parts[2] != "" {
		return nil, errors.New("an unsecured token must have an empty signature")
	}
	payload, err := decodeSegment(parts[1])
	if err != nil {
		return nil, fmt.Errorf("parse token claims: %w", err)
	}
	return payload, nil
}

// decodeSegment decodes base64url with or without padding, as Java's URL
// decoder (Kafka's) accepts both.
func decodeSegment(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// checkClaims runs the claim checks both modes share on a claims set.
func (v *OAuthValidator) checkClaims(payload []byte, now time.Time) (string, time.Time, error) {
	var c jwt.Claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return "", time.Time{}, fmt.Errorf("parse token claims: %w", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(payload, &raw); err != nil {
		return "", time.Time{}, fmt.Errorf("parse token claims: %w", err)
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
	if c.IssuedAt != nil && !c.Expiry.Time().After(c.IssuedAt.Time()) {
		return "", time.Time{}, errors.New("token exp is not after its iat")
	}
	principal, _ := raw[v.cfg.PrincipalClaim].(string)
	if principal == "" {
		return "", time.Time{}, fmt.Errorf("token has no %s claim (a non-empty string)", v.cfg.PrincipalClaim)
	}
	if err := v.checkScope(raw[v.cfg.ScopeClaim]); err != nil {
		return "", time.Time{}, err
	}
	return principal, c.Expiry.Time(), nil
}

// checkScope checks that the scope claim (absent, a space-separated string
// or a list of strings) holds every required scope.
func (v *OAuthValidator) checkScope(claim any) error {
	if len(v.cfg.RequiredScope) == 0 {
		return nil
	}
	var have []string
	switch s := claim.(type) {
	case nil:
	case string:
		have = strings.Fields(s)
	case []any:
		for _, e := range s {
			str, ok := e.(string)
			if !ok {
				return fmt.Errorf("token %s claim holds a non-string", v.cfg.ScopeClaim)
			}
			have = append(have, str)
		}
	default:
		return fmt.Errorf("token %s claim is neither a string nor a list", v.cfg.ScopeClaim)
	}
	for _, r := range v.cfg.RequiredScope {
		if !slices.Contains(have, r) {
			return fmt.Errorf("%w: token scope %q lacks %q", errInsufficientScope, have, r)
		}
	}
	return nil
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
	if errors.Is(err, errInsufficientScope) {
		return nil, true, &Failure{Reason: "insufficient_scope", Msg: "Authentication failed: OAUTHBEARER token refused (insufficient_scope)", Err: err}
	}
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
