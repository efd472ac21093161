package sasl

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/xdg-go/scram"

	"github.com/regent-broker/regent/actors/users"
)

// memCreds is a credential map for tests.
type memCreds map[string]map[users.Mechanism]users.Credential

func (m memCreds) Lookup(u string, mech users.Mechanism) (users.Credential, bool) {
	c, ok := m[u][mech]
	return c, ok
}

func (m memCreds) add(t *testing.T, user, pass string, mech users.Mechanism) {
	t.Helper()
	salt := []byte("0123456789abcdef")
	salted, err := users.SaltPassword(mech, pass, salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if m[user] == nil {
		m[user] = map[users.Mechanism]users.Credential{}
	}
	m[user][mech] = users.FromSaltedPassword(mech, salted, salt, 4096)
}

func newAuth(t *testing.T, creds Credentials, o *OAuthValidator, mechs ...string) *Authenticator {
	t.Helper()
	a, err := New(Config{Mechanisms: mechs, Credentials: creds, OAuth: o})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// runScram drives a real client conversation (xdg-go/scram's client)
// against a session, returning the session's outcome.
func runScram(t *testing.T, a *Authenticator, mech, user, pass string) (Session, error) {
	t.Helper()
	hf := scram.SHA256
	if mech == ScramSHA512 {
		hf = scram.SHA512
	}
	cl, err := hf.NewClient(user, pass, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := cl.NewConversation()
	s, err := a.Start(mech)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := conv.Step("")
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		reply, done, err := s.Step([]byte(msg), time.Now())
		if err != nil {
			return s, err
		}
		if done {
			// The client checks the server's signature.
			if _, err := conv.Step(string(reply)); err != nil {
				t.Fatalf("client refused the server's final message: %v", err)
			}
			if !conv.Valid() {
				t.Fatal("client conversation not valid")
			}
			return s, nil
		}
		if msg, err = conv.Step(string(reply)); err != nil {
			t.Fatalf("client step: %v", err)
		}
	}
	t.Fatal("SCRAM exchange did not end")
	return nil, nil
}

func TestScram(t *testing.T) {
	creds := memCreds{}
	creds.add(t, "alice", "s3cret", users.ScramSHA256)
	creds.add(t, "alice", "s3cret", users.ScramSHA512)
	creds.add(t, "bob", "pw", users.ScramSHA256) // no SHA-512 credential
	a := newAuth(t, creds, nil)
	for _, tc := range []struct {
		mech, user, pass, reason string
	}{
		{ScramSHA256, "alice", "s3cret", ""},
		{ScramSHA512, "alice", "s3cret", ""},
		{ScramSHA256, "bob", "pw", ""},
		{ScramSHA512, "bob", "pw", "unknown_user"},
		{ScramSHA256, "alice", "wrong", "bad_password"},
		{ScramSHA512, "mallory", "x", "unknown_user"},
	} {
		s, err := runScram(t, a, tc.mech, tc.user, tc.pass)
		if tc.reason == "" {
			if err != nil {
				t.Errorf("%s %s: %v", tc.mech, tc.user, err)
			} else if s.Principal() != "User:"+tc.user {
				t.Errorf("%s %s: principal %q", tc.mech, tc.user, s.Principal())
			}
			continue
		}
		if got := ReasonOf(err); got != tc.reason {
			t.Errorf("%s %s/%s: reason %q (%v), want %q", tc.mech, tc.user, tc.pass, got, err, tc.reason)
		}
		if s.Principal() != "" {
			t.Errorf("%s %s: failed session has principal %q", tc.mech, tc.user, s.Principal())
		}
	}
	// A malformed first message.
	s, _ := a.Start(ScramSHA256)
	if _, done, err := s.Step([]byte("garbage"), time.Now()); !done || ReasonOf(err) != "malformed" {
		t.Errorf("garbage: done=%v err=%v", done, err)
	}
}

func TestPlain(t *testing.T) {
	creds := memCreds{}
	creds.add(t, "alice", "s3cret", users.ScramSHA512)
	creds.add(t, "carol", "pw2", users.ScramSHA256)
	a := newAuth(t, creds, nil)
	for _, tc := range []struct {
		msg, principal, reason string
	}{
		{"\x00alice\x00s3cret", "User:alice", ""},
		{"alice\x00alice\x00s3cret", "User:alice", ""},
		{"\x00carol\x00pw2", "User:carol", ""},
		{"\x00alice\x00wrong", "", "bad_password"},
		{"\x00nobody\x00s3cret", "", "unknown_user"},
		{"bob\x00alice\x00s3cret", "", "authorization_id"},
		{"alice:s3cret", "", "malformed"},
		{"\x00alice\x00", "", "malformed"},
	} {
		s, _ := a.Start(Plain)
		_, done, err := s.Step([]byte(tc.msg), time.Now())
		if !done {
			t.Errorf("%q: not done", tc.msg)
		}
		if tc.reason == "" && (err != nil || s.Principal() != tc.principal) {
			t.Errorf("%q: principal %q err %v", tc.msg, s.Principal(), err)
		}
		if tc.reason != "" && ReasonOf(err) != tc.reason {
			t.Errorf("%q: reason %q (%v), want %q", tc.msg, ReasonOf(err), err, tc.reason)
		}
	}
}

func TestMechanismConfig(t *testing.T) {
	if _, err := New(Config{Mechanisms: []string{"GSSAPI"}, Credentials: memCreds{}}); err == nil {
		t.Error("GSSAPI accepted")
	}
	if _, err := New(Config{Mechanisms: []string{OAuthBearer}}); err == nil {
		t.Error("OAUTHBEARER without a JWKS accepted")
	}
	a := newAuth(t, memCreds{}, nil, ScramSHA512)
	if _, err := a.Start(Plain); err == nil {
		t.Error("PLAIN started though not enabled")
	}
}

// oauthFixture is a signing key whose public half is in a JWKS file.
type oauthFixture struct {
	key  *ecdsa.PrivateKey
	kid  string
	jwks string
}

func newOAuthFixture(t *testing.T) *oauthFixture {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f := &oauthFixture{key: key, kid: "test-key", jwks: filepath.Join(t.TempDir(), "jwks.json")}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: f.kid, Algorithm: string(jose.ES256), Use: "sig"}}}
	raw, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.jwks, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// sign makes a JWT with claims, signed by key under kid.
func sign(t *testing.T, key *ecdsa.PrivateKey, kid string, c jwt.Claims) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func bearer(tok string) []byte { return []byte("n,,\x01auth=Bearer " + tok + "\x01\x01") }

func TestOAuthBearer(t *testing.T) {
	f := newOAuthFixture(t)
	v, err := NewOAuthValidator(OAuthConfig{JWKSFile: f.jwks, Issuer: "https://issuer.test", Audience: "regent"})
	if err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, memCreds{}, v, OAuthBearer)
	now := time.Now()
	good := jwt.Claims{Subject: "svc-orders", Issuer: "https://issuer.test", Audience: jwt.Audience{"regent"}, Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	mod := func(fn func(*jwt.Claims)) jwt.Claims { c := good; fn(&c); return c }
	for _, tc := range []struct {
		name   string
		msg    []byte
		reason string
	}{
		{"valid", bearer(sign(t, f.key, f.kid, good)), ""},
		{"valid with authzid", []byte("n,a=svc-orders,\x01auth=Bearer " + sign(t, f.key, f.kid, good) + "\x01\x01"), ""},
		{"expired", bearer(sign(t, f.key, f.kid, mod(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-time.Hour)) }))), "bad_token"},
		{"not yet valid", bearer(sign(t, f.key, f.kid, mod(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(time.Hour)) }))), "bad_token"},
		{"no exp", bearer(sign(t, f.key, f.kid, mod(func(c *jwt.Claims) { c.Expiry = nil }))), "bad_token"},
		{"forged (other key, same kid)", bearer(sign(t, other, f.kid, good)), "bad_token"},
		{"unknown kid", bearer(sign(t, f.key, "other", good)), "bad_token"},
		{"wrong issuer", bearer(sign(t, f.key, f.kid, mod(func(c *jwt.Claims) { c.Issuer = "https://evil.test" }))), "bad_token"},
		{"wrong audience", bearer(sign(t, f.key, f.kid, mod(func(c *jwt.Claims) { c.Audience = jwt.Audience{"other"} }))), "bad_token"},
		{"no subject", bearer(sign(t, f.key, f.kid, mod(func(c *jwt.Claims) { c.Subject = "" }))), "bad_token"},
		{"authzid not the subject", []byte("n,a=admin,\x01auth=Bearer " + sign(t, f.key, f.kid, good) + "\x01\x01"), "authorization_id"},
		{"not a JWT", bearer("abc.def.ghi"), "bad_token"},
		{"no auth pair", []byte("n,,\x01host=x\x01\x01"), "malformed"},
		{"channel binding", []byte("p=tls-unique,,\x01auth=Bearer x\x01\x01"), "malformed"},
	} {
		s, _ := a.Start(OAuthBearer)
		_, done, err := s.Step(tc.msg, now)
		if !done {
			t.Errorf("%s: not done", tc.name)
		}
		if tc.reason == "" {
			if err != nil || s.Principal() != "User:svc-orders" {
				t.Errorf("%s: principal %q err %v", tc.name, s.Principal(), err)
			}
			if !s.Expiry().Equal(good.Expiry.Time()) {
				t.Errorf("%s: expiry %v, want the token's %v", tc.name, s.Expiry(), good.Expiry.Time())
			}
			continue
		}
		var fl *Failure
		if !errors.As(err, &fl) || fl.Reason != tc.reason {
			t.Errorf("%s: err %v, want reason %q", tc.name, err, tc.reason)
		}
	}
}

func TestOAuthJWKSRefusesPrivateKeys(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	raw, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key, KeyID: "k"}}})
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewOAuthValidator(OAuthConfig{JWKSFile: path}); err == nil {
		t.Error("a JWKS holding a private key was accepted")
	}
}

// manualScram runs a SCRAM-SHA-256 exchange by hand so the final message
// can be shaped: finalNonce maps (client nonce, server nonce) to the r=
// the client sends; gs2 is the GS2 header and user the n= value.
func manualScram(t *testing.T, a *Authenticator, gs2, user, pass string, finalNonce func(c, s string) string, cb string) error {
	t.Helper()
	s, _ := a.Start(ScramSHA256)
	cnonce := `VhIw~:3[0MiD\\l/2mg-8\i`
	bare := "n=" + user + ",r=" + cnonce
	reply, done, err := s.Step([]byte(gs2+bare), time.Now())
	if err != nil || done {
		return fmt.Errorf("first: done=%v %w", done, err)
	}
	var snonce, salt64 string
	var iters int
	for _, f := range strings.Split(string(reply), ",") {
		switch {
		case strings.HasPrefix(f, "r="):
			snonce = f[2:]
		case strings.HasPrefix(f, "s="):
			salt64 = f[2:]
		case strings.HasPrefix(f, "i="):
			iters, _ = strconv.Atoi(f[2:])
		}
	}
	salt, _ := base64.StdEncoding.DecodeString(salt64)
	salted, err := users.SaltPassword(users.ScramSHA256, pass, salt, int32(iters))
	if err != nil {
		t.Fatal(err)
	}
	if cb == "" {
		cb = base64.StdEncoding.EncodeToString([]byte(gs2))
	}
	without := "c=" + cb + ",r=" + finalNonce(cnonce, snonce)
	auth := bare + "," + string(reply) + "," + without
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	ck := mac(salted, "Client Key")
	sk := sha256.Sum256(ck)
	sig := mac(sk[:], auth)
	proof := make([]byte, len(ck))
	for i := range ck {
		proof[i] = ck[i] ^ sig[i]
	}
	final, done, err := s.Step([]byte(without+",p="+base64.StdEncoding.EncodeToString(proof)), time.Now())
	if err != nil {
		return err
	}
	if !done {
		return errors.New("not done after the final message")
	}
	want := "v=" + base64.StdEncoding.EncodeToString(mac(mac(salted, "Server Key"), auth))
	if string(final) != want {
		return fmt.Errorf("server signature %q, want %q", final, want)
	}
	return nil
}

func TestScramNonceAndEncoding(t *testing.T) {
	creds := memCreds{}
	creds.add(t, "alice", "pw", users.ScramSHA256)
	creds.add(t, "a,b=c", "pw", users.ScramSHA256)
	a := newAuth(t, creds, nil)
	exact := func(_, s string) string { return s }
	for _, tc := range []struct {
		name, gs2, user, pass string
		nonce                 func(c, s string) string
		cb, reason            string
	}{
		{"RFC nonce", "n,,", "alice", "pw", exact, "", ""},
		{"librdkafka < 2.6.1 nonce (client nonce + server nonce), as Kafka 3.8.1+ accepts", "n,,", "alice", "pw", func(c, s string) string { return c + s }, "", ""},
		{"y flag", "y,,", "alice", "pw", exact, "", ""},
		{"authzid = user", "n,a=alice,", "alice", "pw", exact, "", ""},
		{"escaped name", "n,,", "a=2Cb=3Dc", "pw", exact, "", ""},
		{"nonce without the server's", "n,,", "alice", "pw", func(c, _ string) string { return c }, "", "malformed"},
		{"nonce with the server's cut", "n,,", "alice", "pw", func(_, s string) string { return s[:len(s)-1] }, "", "malformed"},
		{"channel binding mismatch", "n,,", "alice", "pw", exact, "eSws", "malformed"},
		{"wrong password", "n,,", "alice", "nope", exact, "", "bad_password"},
		{"bad escape", "n,,", "a=2Xb", "pw", exact, "", "malformed"},
		{"authzid other user", "n,a=root,", "alice", "pw", exact, "", "authorization_id"},
		{"channel binding asked", "p=tls-unique,,", "alice", "pw", exact, "", "malformed"},
	} {
		err := manualScram(t, a, tc.gs2, tc.user, tc.pass, tc.nonce, tc.cb)
		if tc.reason == "" && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if tc.reason != "" && ReasonOf(err) != tc.reason {
			t.Errorf("%s: %v, want reason %q", tc.name, err, tc.reason)
		}
	}
}

// TestOAuthJWKSReload: a rotated key is accepted once the JWKS is
// reloaded; a broken file keeps the keys in use.
func TestOAuthJWKSReload(t *testing.T) {
	f := newOAuthFixture(t)
	v, err := NewOAuthValidator(OAuthConfig{JWKSFile: f.jwks})
	if err != nil {
		t.Fatal(err)
	}
	next, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	claims := jwt.Claims{Subject: "s", Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}
	rotated := sign(t, next, "next", claims)
	if _, _, err := v.Validate(rotated, time.Now()); err == nil {
		t.Fatal("a token of an unknown key accepted")
	}
	raw, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &next.PublicKey, KeyID: "next", Algorithm: string(jose.ES256)}}})
	if err := os.WriteFile(f.jwks, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := v.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Validate(rotated, time.Now()); err != nil {
		t.Fatalf("rotated key after reload: %v", err)
	}
	if err := os.WriteFile(f.jwks, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := v.Reload(); err == nil {
		t.Fatal("a broken JWKS reloaded")
	}
	if _, _, err := v.Validate(rotated, time.Now()); err != nil {
		t.Fatalf("keys lost after a failed reload: %v", err)
	}
}

// tokenCreds is memCreds with one delegation token: id "tok1", owner
// User:alice, password pw.
type tokenCreds struct {
	memCreds
	expired bool
}

func (c tokenCreds) LookupToken(id string, m users.Mechanism, now int64) (string, users.Credential, int64, bool) {
	cred, ok := c.memCreds["token:"+id][m]
	if !ok || c.expired {
		return "", users.Credential{}, 0, false
	}
	return "User:alice", cred, now + 60_000, true
}

// runKgoScram drives franz-go's SCRAM client, which sends tokenauth=true
// for a token, against a session.
func runKgoScram(t *testing.T, a *Authenticator, auth kscram.Auth, sha512 bool) (Session, error) {
	t.Helper()
	mech := auth.AsSha256Mechanism()
	name := ScramSHA256
	if sha512 {
		mech, name = auth.AsSha512Mechanism(), ScramSHA512
	}
	cs, msg, err := mech.Authenticate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.Start(name)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		reply, done, err := s.Step(msg, time.Now())
		if err != nil {
			return s, err
		}
		cdone, next, cerr := cs.Challenge(reply)
		if cerr != nil {
			t.Fatalf("client refused the server's message: %v", cerr)
		}
		if done {
			if !cdone {
				t.Fatal("server done, client not")
			}
			return s, nil
		}
		msg = next
	}
	t.Fatal("SCRAM exchange did not end")
	return nil, nil
}

// A delegation token authenticates with tokenauth=true as its owner, and
// says so; the same id and password without the extension, an expired
// token, or a store that serves no tokens, do not.
func TestScramDelegationToken(t *testing.T) {
	mc := memCreds{}
	mc.add(t, "token:tok1", "pw", users.ScramSHA256)
	mc.add(t, "token:tok1", "pw", users.ScramSHA512)
	a := newAuth(t, tokenCreds{memCreds: mc}, nil)
	for _, sha512 := range []bool{false, true} {
		s, err := runKgoScram(t, a, kscram.Auth{User: "tok1", Pass: "pw", IsToken: true}, sha512)
		if err != nil {
			t.Fatalf("token login (sha512 %v): %v", sha512, err)
		}
		if s.Principal() != "User:alice" || !s.(interface{ TokenAuthenticated() bool }).TokenAuthenticated() {
			t.Fatalf("token login: principal %q", s.Principal())
		}
		if until := time.Until(s.Expiry()); until < 50*time.Second || until > time.Minute {
			t.Fatalf("token session expiry in %v, want the token's (a minute)", until)
		}
	}
	if _, err := runKgoScram(t, a, kscram.Auth{User: "tok1", Pass: "wrong", IsToken: true}, true); ReasonOf(err) != "bad_password" {
		t.Errorf("wrong token password: %v", err)
	}
	if _, err := runKgoScram(t, a, kscram.Auth{User: "tok1", Pass: "pw"}, true); ReasonOf(err) != "unknown_user" {
		t.Errorf("token id as a user name: %v", err)
	}
	if _, err := runKgoScram(t, newAuth(t, tokenCreds{memCreds: mc, expired: true}, nil), kscram.Auth{User: "tok1", Pass: "pw", IsToken: true}, true); ReasonOf(err) != "unknown_token" {
		t.Errorf("expired token: %v", err)
	}
	if _, err := runKgoScram(t, newAuth(t, mc, nil), kscram.Auth{User: "tok1", Pass: "pw", IsToken: true}, true); ReasonOf(err) != "unknown_token" {
		t.Errorf("store without tokens: %v", err)
	}
	// A user's login is not token-authenticated.
	mc.add(t, "bob", "pw", users.ScramSHA512)
	s, err := runKgoScram(t, a, kscram.Auth{User: "bob", Pass: "pw"}, true)
	if err != nil || s.(interface{ TokenAuthenticated() bool }).TokenAuthenticated() || !s.Expiry().IsZero() {
		t.Fatalf("bob: %v", err)
	}
}
