package sasl

import (
	"testing"
	"time"

	"github.com/regent-broker/regent/actors/users"
)

// FuzzScram feeds arbitrary client messages to a SCRAM session (a first
// message, then a final one): it must never panic, and a final message
// that was not made with the password must never authenticate.
func FuzzScram(f *testing.F) {
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abcXYZ,p=AAAA"))
	f.Add([]byte("y,a=alice,n=alice,r=abc,tokenauth=true"), []byte("c=eSxhPWFsaWNlLA==,r=abc,p="))
	f.Add([]byte("n,,n=a=2Cb,r=~"), []byte(",p="))
	f.Add([]byte("p=tls-unique,,n=x,r=y"), []byte("c=,r=,p=,p="))
	creds := memCreds{}
	salt := []byte("salt")
	salted, _ := users.SaltPassword(users.ScramSHA256, "pw", salt, 4096)
	creds["alice"] = map[users.Mechanism]users.Credential{users.ScramSHA256: users.FromSaltedPassword(users.ScramSHA256, salted, salt, 4096)}
	a, err := New(Config{Mechanisms: []string{ScramSHA256}, Credentials: creds})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s, _ := a.Start(ScramSHA256)
		if _, done, err := s.Step(first, time.Now()); done || err != nil {
			return
		}
		if _, _, err := s.Step(final, time.Now()); err == nil {
			// The server nonce is random: a fixed final message cannot
			// carry it, let alone a valid proof over it.
			t.Fatalf("authenticated with a fuzzed final message %q", final)
		}
	})
}

// FuzzOAuthFirst: RFC 7628 parsing never panics on arbitrary input.
func FuzzOAuthFirst(f *testing.F) {
	f.Add([]byte("n,,\x01auth=Bearer abc.def.ghi\x01\x01"))
	f.Add([]byte("n,a=me,\x01host=x\x01auth=bearer t\x01\x01"))
	f.Add([]byte("\x01\x01"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		tok, _, err := parseOAuthFirst(msg)
		if err == nil && tok == "" {
			t.Fatal("no error and no token")
		}
	})
}

// FuzzPlain: PLAIN never panics and never authenticates without the
// password.
func FuzzPlain(f *testing.F) {
	f.Add([]byte("\x00alice\x00pw"))
	f.Add([]byte("alice\x00alice\x00nope"))
	salt := []byte("salt")
	salted, _ := users.SaltPassword(users.ScramSHA512, "pw", salt, 4096)
	creds := memCreds{"alice": {users.ScramSHA512: users.FromSaltedPassword(users.ScramSHA512, salted, salt, 4096)}}
	a, err := New(Config{Mechanisms: []string{Plain}, Credentials: creds})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		s, _ := a.Start(Plain)
		if _, _, err := s.Step(msg, time.Now()); err == nil {
			if s.Principal() != "User:alice" {
				t.Fatalf("authenticated as %q", s.Principal())
			}
		}
	})
}
