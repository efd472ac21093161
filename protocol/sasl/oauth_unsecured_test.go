package sasl

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
)

// unsecured makes an unsecured JWS: header and claims JSON, base64url
// without padding, and an empty signature (what kgo's TestOAuthAuth sends).
func unsecured(header, claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(header)) + "." + enc([]byte(claims)) + "."
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestOAuthUnsecured: the unsecured mode runs Kafka's default validator's
// checks: alg none and an empty signature, the principal claim, exp
// required and not past, iat not in the future and before exp, and the
// required scopes.
func TestOAuthUnsecured(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f := newOAuthFixture(t)
	signed := sign(t, f.key, f.kid, jwt.Claims{Subject: "admin", Expiry: jwt.NewNumericDate(now.Add(time.Hour))})
	num := func(d time.Duration) string { return itoa(now.Add(d).Unix()) }
	v, err := NewOAuthValidator(OAuthConfig{Unsecured: true})
	if err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, memCreds{}, v, OAuthBearer)
	none := `{"alg":"none"}`
	for _, tc := range []struct {
		name, tok, reason, principal string
	}{
		{"kgo's token", unsecured(none, `{"sub":"admin","exp":`+num(time.Hour)+`}`), "", "User:admin"},
		{"iat and scope", unsecured(`{"alg":"none","typ":"JWT"}`, `{"sub":"svc","iat":`+num(0)+`,"exp":`+num(time.Minute)+`,"scope":"a b"}`), "", "User:svc"},
		{"padded segments", base64.URLEncoding.EncodeToString([]byte(none)) + "." + base64.URLEncoding.EncodeToString([]byte(`{"sub":"pad","exp":`+num(time.Hour)+`}`)) + ".", "", "User:pad"},
		{"within the clock skew", unsecured(none, `{"sub":"late","exp":`+num(-10*time.Second)+`}`), "", "User:late"},
		{"missing sub", unsecured(none, `{"exp":`+num(time.Hour)+`}`), "bad_token", ""},
		{"empty sub", unsecured(none, `{"sub":"","exp":`+num(time.Hour)+`}`), "bad_token", ""},
		{"sub not a string", unsecured(none, `{"sub":7,"exp":`+num(time.Hour)+`}`), "bad_token", ""},
		{"expired", unsecured(none, `{"sub":"admin","exp":`+num(-time.Minute)+`}`), "bad_token", ""},
		{"no exp", unsecured(none, `{"sub":"admin"}`), "bad_token", ""},
		{"exp not a number", unsecured(none, `{"sub":"admin","exp":"soon"}`), "bad_token", ""},
		{"issued in the future", unsecured(none, `{"sub":"admin","iat":`+num(time.Hour)+`,"exp":`+num(2*time.Hour)+`}`), "bad_token", ""},
		{"exp not after iat", unsecured(none, `{"sub":"admin","iat":`+num(0)+`,"exp":`+num(0)+`}`), "bad_token", ""},
		{"alg RS256", unsecured(`{"alg":"RS256"}`, `{"sub":"admin","exp":`+num(time.Hour)+`}`), "bad_token", ""},
		{"a signed ES256 token", signed, "bad_token", ""},
		{"alg missing", unsecured(`{}`, `{"sub":"admin","exp":`+num(time.Hour)+`}`), "bad_token", ""},
		{"alg none with a signature", unsecured(none, `{"sub":"admin","exp":`+num(time.Hour)+`}`) + "c2ln", "bad_token", ""},
		{"two parts", strings.TrimSuffix(unsecured(none, `{"sub":"admin","exp":`+num(time.Hour)+`}`), "."), "bad_token", ""},
		{"claims not JSON", unsecured(none, `sub=admin`), "bad_token", ""},
	} {
		s, _ := a.Start(OAuthBearer)
		_, done, err := s.Step(bearer(tc.tok), now)
		if !done {
			t.Errorf("%s: not done", tc.name)
		}
		if tc.reason == "" {
			if err != nil || s.Principal() != tc.principal {
				t.Errorf("%s: principal %q err %v, want %q", tc.name, s.Principal(), err, tc.principal)
			}
			continue
		}
		var fl *Failure
		if !errors.As(err, &fl) || fl.Reason != tc.reason || !strings.Contains(fl.Msg, "invalid_token") {
			t.Errorf("%s: err %v, want reason %q with invalid_token", tc.name, err, tc.reason)
		}
	}
}

// TestOAuthUnsecuredSessionExpiry: the session ends at the token's exp
// (KIP-368 re-authentication), as with signed tokens.
func TestOAuthUnsecuredSessionExpiry(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v, err := NewOAuthValidator(OAuthConfig{Unsecured: true})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newAuth(t, memCreds{}, v, OAuthBearer).Start(OAuthBearer)
	if _, _, err := s.Step(bearer(unsecured(`{"alg":"none"}`, `{"sub":"admin","exp":`+itoa(now.Unix()+90)+`}`)), now); err != nil {
		t.Fatal(err)
	}
	if want := now.Add(90 * time.Second); !s.Expiry().Equal(want) {
		t.Fatalf("expiry %v, want %v", s.Expiry(), want)
	}
}

// TestOAuthUnsecuredClaimsConfig: another principal claim, and required
// scopes from a string or a list claim; a missing scope is
// insufficient_scope.
func TestOAuthUnsecuredClaimsConfig(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	exp := itoa(now.Unix() + 3600)
	v, err := NewOAuthValidator(OAuthConfig{Unsecured: true, PrincipalClaim: "client_id", ScopeClaim: "scp", RequiredScope: []string{"kafka", "write"}})
	if err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, memCreds{}, v, OAuthBearer)
	for _, tc := range []struct{ name, claims, reason, principal string }{
		{"string scope", `{"sub":"x","client_id":"app","exp":` + exp + `,"scp":"read kafka write"}`, "", "User:app"},
		{"list scope", `{"client_id":"app","exp":` + exp + `,"scp":["write","kafka"]}`, "", "User:app"},
		{"scope lacks one", `{"client_id":"app","exp":` + exp + `,"scp":"kafka"}`, "insufficient_scope", ""},
		{"no scope", `{"client_id":"app","exp":` + exp + `}`, "insufficient_scope", ""},
		{"scope not strings", `{"client_id":"app","exp":` + exp + `,"scp":[1,2]}`, "bad_token", ""},
		{"only sub", `{"sub":"x","exp":` + exp + `,"scp":"kafka write"}`, "bad_token", ""},
	} {
		s, _ := a.Start(OAuthBearer)
		_, _, err := s.Step(bearer(unsecured(`{"alg":"none"}`, tc.claims)), now)
		if tc.reason == "" {
			if err != nil || s.Principal() != tc.principal {
				t.Errorf("%s: principal %q err %v, want %q", tc.name, s.Principal(), err, tc.principal)
			}
			continue
		}
		var fl *Failure
		wantMsg := map[string]string{"bad_token": "invalid_token", "insufficient_scope": "insufficient_scope"}[tc.reason]
		if !errors.As(err, &fl) || fl.Reason != tc.reason || !strings.Contains(fl.Msg, wantMsg) {
			t.Errorf("%s: err %v, want reason %q", tc.name, err, tc.reason)
		}
	}
}

// TestOAuthUnsecuredOffByDefault: with a JWKS, an unsecured token is
// refused; a JWKS and the unsecured mode together are refused, as is
// neither.
func TestOAuthUnsecuredOffByDefault(t *testing.T) {
	f := newOAuthFixture(t)
	v, err := NewOAuthValidator(OAuthConfig{JWKSFile: f.jwks})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s, _ := newAuth(t, memCreds{}, v, OAuthBearer).Start(OAuthBearer)
	_, _, err = s.Step(bearer(unsecured(`{"alg":"none"}`, `{"sub":"admin","exp":`+itoa(now.Unix()+3600)+`}`)), now)
	if ReasonOf(err) != "bad_token" {
		t.Fatalf("alg none with a JWKS: err %v, want bad_token", err)
	}
	if _, err := NewOAuthValidator(OAuthConfig{JWKSFile: f.jwks, Unsecured: true}); err == nil {
		t.Error("a JWKS with the unsecured mode was accepted")
	}
	if _, err := NewOAuthValidator(OAuthConfig{}); err == nil {
		t.Error("neither a JWKS nor the unsecured mode was accepted")
	}
	u, err := NewOAuthValidator(OAuthConfig{Unsecured: true})
	if err != nil {
		t.Fatal(err)
	}
	if u.Reload() == nil {
		t.Error("Reload in the unsecured mode reported success")
	}
}

// FuzzOAuthUnsecured: the unsecured validator never panics on arbitrary
// tokens.
func FuzzOAuthUnsecured(f *testing.F) {
	f.Add(unsecured(`{"alg":"none"}`, `{"sub":"admin","exp":1800003600}`))
	f.Add(unsecured(`{"alg":"none"}`, `{"sub":"a","iat":1.5e9,"exp":"x","scope":["k",1]}`))
	f.Add("a.b.")
	v, err := NewOAuthValidator(OAuthConfig{Unsecured: true, RequiredScope: []string{"k"}})
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, tok string) {
		if p, _, err := v.Validate(tok, now); err == nil && p == "" {
			t.Fatalf("%q accepted with no principal", tok)
		}
	})
}
