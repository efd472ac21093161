package sasl

import (
	"testing"
	"time"

	"github.com/xdg-go/scram"

	"github.com/regent-broker/regent/actors/users"
)

// BenchmarkPlain is one PLAIN login: salting the password with the stored
// salt (4096 rounds of SHA-512) and comparing keys. It bounds how many
// PLAIN logins a core serves per second.
func BenchmarkPlain(b *testing.B) {
	salt := []byte("salt")
	salted, _ := users.SaltPassword(users.ScramSHA512, "pw", salt, 4096)
	creds := memCreds{"alice": {users.ScramSHA512: users.FromSaltedPassword(users.ScramSHA512, salted, salt, 4096)}}
	a, _ := New(Config{Mechanisms: []string{Plain}, Credentials: creds})
	for b.Loop() {
		s, _ := a.Start(Plain)
		if _, _, err := s.Step([]byte("\x00alice\x00pw"), time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScramServer is the server's side of one SCRAM-SHA-512 login
// (the client's PBKDF2 is done once, outside the loop): the server does no
// salting, only hashes and HMACs.
func BenchmarkScramServer(b *testing.B) {
	salt := []byte("salt")
	salted, _ := users.SaltPassword(users.ScramSHA512, "pw", salt, 4096)
	creds := memCreds{"alice": {users.ScramSHA512: users.FromSaltedPassword(users.ScramSHA512, salted, salt, 4096)}}
	a, _ := New(Config{Mechanisms: []string{ScramSHA512}, Credentials: creds})
	cl, _ := scram.SHA512.NewClient("alice", "pw", "")
	for b.Loop() {
		conv := cl.NewConversation() // derived keys cached by the client
		s, _ := a.Start(ScramSHA512)
		m1, _ := conv.Step("")
		r1, _, err := s.Step([]byte(m1), time.Now())
		if err != nil {
			b.Fatal(err)
		}
		m2, _ := conv.Step(string(r1))
		if _, _, err := s.Step([]byte(m2), time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}
