package users

import (
	"crypto/hmac"
	"crypto/sha512"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A token's life through the store: created with its HMAC and SCRAM
// credentials of the HMAC, looked up until it expires, renewed and
// expired only by its owner, requester or renewers, bounded by its max,
// removed by an expiry of -1 or a purge, and kept across a reopen.
func TestTokenLifecycle(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("secret-key")
	const now = int64(1_000_000)
	tok, err := NewToken(secret, "User:alice", "User:alice", []string{"User:bob"}, now, now+1000, now+5000)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha512.New, secret)
	mac.Write([]byte(tok.ID))
	if !hmac.Equal(mac.Sum(nil), tok.HMAC) {
		t.Fatal("the token's HMAC is not HMAC-SHA512 of its id under the secret")
	}
	if err := s.CreateToken(tok); err != nil {
		t.Fatal(err)
	}
	for _, m := range []Mechanism{ScramSHA256, ScramSHA512} {
		owner, cred, exp, ok := s.LookupToken(tok.ID, m, now+1000)
		if !ok || owner != "User:alice" || exp != now+1000 || !cred.Verify(tok.Password()) || cred.Verify("x") {
			t.Fatalf("%s lookup: ok=%v owner=%q", m, ok, owner)
		}
	}
	if _, _, _, ok := s.LookupToken(tok.ID, ScramSHA512, now+1001); ok {
		t.Fatal("an expired token authenticates")
	}
	if _, err := s.RenewToken(tok.HMAC, "User:carol", 2000, 1000, now+500); !errors.Is(err, kerr.DelegationTokenOwnerMismatch) {
		t.Fatalf("carol renews: %v", err)
	}
	if _, err := s.RenewToken([]byte("nope"), "User:alice", 2000, 1000, now+500); !errors.Is(err, kerr.DelegationTokenNotFound) {
		t.Fatalf("unknown HMAC: %v", err)
	}
	exp, err := s.RenewToken(tok.HMAC, "User:bob", 2000, 1000, now+500)
	if err != nil || exp != now+2500 {
		t.Fatalf("bob renews: expiry %d, %v; want %d", exp, err, now+2500)
	}
	if exp, err := s.RenewToken(tok.HMAC, "User:alice", -1, 1000, now+600); err != nil || exp != now+1600 {
		t.Fatalf("renew with the default period: %d, %v", exp, err)
	}
	if exp, err := s.RenewToken(tok.HMAC, "User:alice", 1<<40, 1000, now+600); err != nil || exp != now+5000 {
		t.Fatalf("renew past max: %d, %v; want the max %d", exp, err, now+5000)
	}
	if _, err := s.RenewToken(tok.HMAC, "User:alice", 1000, 1000, now+5001); !errors.Is(err, kerr.DelegationTokenExpired) {
		t.Fatalf("renew after max: %v", err)
	}
	if _, _, _, ok := s.LookupToken(tok.ID, ScramSHA512, now+4000); !ok {
		t.Fatal("renewed token does not authenticate")
	}

	// Reopen: the token is on disk, readable by the broker only.
	_ = s.Close()
	path := filepath.Join(dir, "meta", TokensFileName)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	s, err = Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if ts := s.Tokens(); len(ts) != 1 || ts[0].ID != tok.ID || ts[0].Expiry != now+5000 || ts[0].Renewers[0] != "User:bob" {
		t.Fatalf("tokens after reopen: %+v", ts)
	}

	// A second token, expired by its owner at once; the first purged.
	tok2, err := NewToken(secret, "User:bob", "User:alice", nil, now, now+1000, now+1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateToken(tok2); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateToken(tok2); !errors.Is(err, kerr.DuplicateResource) {
		t.Fatalf("the same id twice: %v", err)
	}
	if exp, err := s.ExpireToken(tok2.HMAC, "User:bob", -1, now+10); err != nil || exp != now+10 {
		t.Fatalf("expire now: %d, %v", exp, err)
	}
	if _, _, _, ok := s.LookupToken(tok2.ID, ScramSHA256, now+10); ok {
		t.Fatal("an expired-at-once token authenticates")
	}
	if n, err := s.PurgeTokens(now + 4999); err != nil || n != 0 {
		t.Fatalf("purge before expiry: %d, %v", n, err)
	}
	if n, err := s.PurgeTokens(now + 5001); err != nil || n != 1 || len(s.Tokens()) != 0 {
		t.Fatalf("purge after expiry: %d, %v, %d left", n, err, len(s.Tokens()))
	}
	_ = s.Close()
}

// Tokens are bounded per owner and in all.
func TestTokenBounds(t *testing.T) {
	ts := tokens{}
	for i := range MaxTokensPerOwner {
		ts[fmt.Sprint("a", i)] = &Token{Owner: "User:alice"}
	}
	if err := checkTokenBounds(ts, "User:alice"); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("alice's token %d: %v", MaxTokensPerOwner+1, err)
	}
	if err := checkTokenBounds(ts, "User:bob"); err != nil {
		t.Fatalf("bob's first: %v", err)
	}
	for i := len(ts); i < MaxTokens; i++ {
		ts[fmt.Sprint("o", i)] = &Token{Owner: fmt.Sprint("User:u", i)}
	}
	if err := checkTokenBounds(ts, "User:bob"); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("token %d: %v", MaxTokens+1, err)
	}
}
