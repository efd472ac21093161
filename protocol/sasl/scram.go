package sasl

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/regent-broker/regent/actors/users"
)

// scramSession is the server side of RFC 5802 for one exchange: the
// client-first message, then the client-final one.
//
// It is written here rather than taken from xdg-go/scram (which the tests
// use as the reference client) for one deviation Kafka makes: librdkafka
// before 2.6.1 sends r=<client nonce><server nonce> in its final message
// (the server nonce already starts with the client's; librdkafka PR 4895),
// and Kafka since 3.8.1 (CVE-2024-56128) checks that the nonce ends with
// the server's rather than equals it, so those clients keep working. The
// proof is checked over the message as received, so that tolerance gives
// nothing away: the client still proves it knows the key over this
// exchange's server nonce.
type scramSession struct {
	mech  string
	m     users.Mechanism
	creds Credentials

	step      int // 0: want client-first; 1: want client-final; 2: done
	cred      users.Credential
	user      string
	gs2       string // the client's GS2 header, which c= must encode
	c1bare    string // client-first-message-bare
	s1        string // server-first-message
	nonce     string // client nonce + server nonce
	principal string
	token     bool   // authenticating with a delegation token (tokenauth=true)
	owner     string // the token's owner, the session's principal then
	// tokenExpiry is the token's expiry (Unix ms) at login.
	tokenExpiry int64
}

func newScramSession(mech string, creds Credentials) *scramSession {
	m, _ := users.ParseMechanism(mech)
	return &scramSession{mech: mech, m: m, creds: creds}
}

func (s *scramSession) Principal() string { return s.principal }

// TokenAuthenticated reports that the session authenticated with a
// delegation token: such a connection may not create, renew, expire or
// describe tokens (Kafka's rule).
func (s *scramSession) TokenAuthenticated() bool { return s.token && s.principal != "" }

// Expiry is a token's expiry for a token-authenticated session (a
// connection re-authenticates by then, when re-authentication is on, and
// an expired token fails it), none otherwise.
func (s *scramSession) Expiry() time.Time {
	if s.token && s.principal != "" {
		return time.UnixMilli(s.tokenExpiry)
	}
	return time.Time{}
}

func (s *scramSession) malformed(format string, args ...any) *Failure {
	s.step = 2
	return &Failure{Reason: "malformed", Msg: "Invalid " + s.mech + " message", Err: fmt.Errorf(format, args...)}
}

func (s *scramSession) Step(msg []byte, now time.Time) ([]byte, bool, error) {
	switch s.step {
	case 0:
		reply, err := s.first(string(msg), now)
		if err != nil {
			return nil, true, err
		}
		return []byte(reply), false, nil
	case 1:
		reply, err := s.final(string(msg))
		if err != nil {
			return nil, true, err
		}
		return []byte(reply), true, nil
	}
	return nil, true, &Failure{Reason: "malformed", Msg: s.mech + " exchange already complete"}
}

// first reads "gs2-header client-first-message-bare", where the GS2 header
// is "n,," or "y,," (with an optional a=authzid) and the bare message
// "n=user,r=nonce[,ext...]".
func (s *scramSession) first(c1 string, now time.Time) (string, error) {
	s.step = 1
	flag, rest, ok := strings.Cut(c1, ",")
	if !ok || (flag != "n" && flag != "y") {
		return "", s.malformed("GS2 flag %q (channel binding is not supported)", flag)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return "", s.malformed("no client-first-message-bare")
	}
	if authz != "" {
		a, ok := strings.CutPrefix(authz, "a=")
		if !ok {
			return "", s.malformed("bad authzid %q", authz)
		}
		if a, ok = decodeSaslName(a); !ok {
			return "", s.malformed("bad authzid encoding")
		}
		authz = a
	}
	s.gs2 = flag + "," + rest[:len(rest)-len(bare)]
	fields := strings.Split(bare, ",")
	if len(fields) < 2 {
		return "", s.malformed("short client-first message")
	}
	name, ok := strings.CutPrefix(fields[0], "n=")
	if !ok {
		return "", s.malformed("no user name")
	}
	if name, ok = decodeSaslName(name); !ok || name == "" {
		return "", s.malformed("bad user name encoding")
	}
	cnonce, ok := strings.CutPrefix(fields[1], "r=")
	if !ok || !printableNonce(cnonce) {
		return "", s.malformed("bad client nonce")
	}
	for _, ext := range fields[2:] {
		// Kafka's only extension is tokenauth (delegation tokens):
		// "tokenauth=true" (case-insensitive, as Kafka's parseBoolean).
		if v, ok := strings.CutPrefix(ext, "tokenauth="); ok {
			s.token = strings.EqualFold(v, "true")
		}
	}
	if authz != "" && authz != name {
		s.step = 2
		return "", &Failure{Reason: "authorization_id", Msg: "Authentication failed: " + s.mech + " authorization id must be empty or the user name"}
	}
	var (
		cred  users.Credential
		owner string
		found bool
	)
	if s.token {
		if tc, served := s.creds.(TokenCredentials); served {
			owner, cred, s.tokenExpiry, found = tc.LookupToken(name, s.m, now.UnixMilli())
		}
	} else {
		cred, found = s.creds.Lookup(name, s.m)
	}
	if !found {
		s.step = 2
		if s.token {
			return "", badCredentials(s.mech, "unknown_token", nil)
		}
		return "", badCredentials(s.mech, "unknown_user", nil)
	}
	snonce := make([]byte, 24)
	if _, err := rand.Read(snonce); err != nil {
		s.step = 2
		return "", &Failure{Reason: "error", Msg: "Authentication failed: internal error", Err: err}
	}
	s.user, s.cred, s.c1bare, s.owner = name, cred, bare, owner
	s.nonce = cnonce + base64.RawURLEncoding.EncodeToString(snonce)
	s.s1 = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(int(cred.Iterations))
	return s.s1, nil
}

// final reads "c=base64(gs2 header),r=nonce[,ext...],p=base64(proof)",
// checks the proof and returns "v=base64(server signature)".
func (s *scramSession) final(c2 string) (string, error) {
	s.step = 2
	i := strings.LastIndex(c2, ",p=")
	if i < 0 {
		return "", s.malformed("no proof")
	}
	withoutProof := c2[:i]
	proof, err := base64.StdEncoding.DecodeString(c2[i+3:])
	if err != nil {
		return "", s.malformed("proof is not base64: %v", err)
	}
	fields := strings.Split(withoutProof, ",")
	if len(fields) < 2 {
		return "", s.malformed("short client-final message")
	}
	cb, ok := strings.CutPrefix(fields[0], "c=")
	if !ok || cb != base64.StdEncoding.EncodeToString([]byte(s.gs2)) {
		return "", s.malformed("channel binding %q does not match the GS2 header", fields[0])
	}
	nonce, ok := strings.CutPrefix(fields[1], "r=")
	if !ok || !strings.HasSuffix(nonce, s.nonce) {
		return "", s.malformed("nonce does not end with the server's")
	}
	h := s.m.Hash()
	auth := []byte(s.c1bare + "," + s.s1 + "," + withoutProof)
	sig := hmac.New(h, s.cred.StoredKey)
	sig.Write(auth)
	clientSig := sig.Sum(nil)
	if len(proof) != len(clientSig) {
		return "", badCredentials(s.mech, "bad_password", errors.New("proof of the wrong length"))
	}
	clientKey := make([]byte, len(proof))
	for j := range proof {
		clientKey[j] = proof[j] ^ clientSig[j]
	}
	sum := h()
	sum.Write(clientKey)
	if !hmac.Equal(sum.Sum(nil), s.cred.StoredKey) {
		return "", badCredentials(s.mech, "bad_password", nil)
	}
	ss := hmac.New(h, s.cred.ServerKey)
	ss.Write(auth)
	s.principal = "User:" + s.user
	if s.token {
		s.principal = s.owner
	}
	return "v=" + base64.StdEncoding.EncodeToString(ss.Sum(nil)), nil
}

// decodeSaslName undoes RFC 5802's escaping of ',' and '=' in names.
func decodeSaslName(s string) (string, bool) {
	if !strings.Contains(s, "=") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// printableNonce: RFC 5802's printable characters, 0x21-0x7e but ','.
func printableNonce(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}
