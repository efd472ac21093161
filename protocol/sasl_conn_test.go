package protocol

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/users"
	"github.com/regent-broker/regent/protocol/sasl"
)

type testCreds map[string]users.Credential

func (c testCreds) Lookup(u string, m users.Mechanism) (users.Credential, bool) {
	cr, ok := c[u]
	return cr, ok && cr.Mechanism == m
}

// newTestAuth is a connection's SASL state with user alice (password
// "pw", SCRAM-SHA-512, so PLAIN works too) whose close is counted.
func newTestAuth(t *testing.T, reauth time.Duration) (*ConnAuth, *ConnInfo, *closeCount) {
	t.Helper()
	salt := []byte("salt")
	salted, err := users.SaltPassword(users.ScramSHA512, "pw", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	a, err := sasl.New(sasl.Config{Credentials: testCreds{"alice": users.FromSaltedPassword(users.ScramSHA512, salted, salt, 4096)}})
	if err != nil {
		t.Fatal(err)
	}
	closed := &closeCount{ch: make(chan struct{}, 4)}
	cfg := &SASLConfig{Auth: a, ReauthAfter: reauth, FailureDelay: time.Millisecond}
	return NewConnAuth(cfg, func() { closed.n.Add(1); closed.ch <- struct{}{} }), &ConnInfo{RemoteAddr: "127.0.0.1:1"}, closed
}

// closeCount counts the closes a ConnAuth asked for; ch hears of each.
type closeCount struct {
	n  atomic.Int32
	ch chan struct{}
}

// waitClosed waits (bounded) for the scheduled close.
func (c *closeCount) waitClosed() bool {
	select {
	case <-c.ch:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// TestConnAuthPhases walks the connection state through its phases:
// before authentication only ApiVersions and the SASL keys are admitted
// and frames are bounded; v1 logs in through SaslAuthenticate; v0 switches
// to raw tokens; a failure admits nothing and closes; a session past its
// lifetime admits only the SASL keys until re-authenticated as the same
// principal.
func TestConnAuthPhases(t *testing.T) {
	ctx, now := context.Background(), time.Now()
	type step struct {
		name  string
		do    func(a *ConnAuth, info *ConnInfo) (code int16)
		code  int16
		admit map[int16]bool // key: admitted after the step
		raw   bool
	}
	pre := map[int16]bool{18: true, 17: true, 36: true, 3: false, 0: false}
	authed := map[int16]bool{18: true, 3: true, 0: true}
	none := map[int16]bool{18: false, 17: false, 36: false, 3: false}
	hs := func(v int16, mech string) func(*ConnAuth, *ConnInfo) int16 {
		return func(a *ConnAuth, info *ConnInfo) int16 { return a.handshake(ctx, info, v, mech) }
	}
	auth := func(msg string) func(*ConnAuth, *ConnInfo) int16 {
		return func(a *ConnAuth, info *ConnInfo) int16 { return a.authenticate(ctx, info, []byte(msg), now).code }
	}
	for _, tc := range []struct {
		name   string
		steps  []step
		closed bool
		princ  string
	}{
		{name: "v1 PLAIN", princ: "User:alice", steps: []step{
			{"start", func(*ConnAuth, *ConnInfo) int16 { return 0 }, 0, pre, false},
			{"handshake", hs(1, "PLAIN"), 0, pre, false},
			{"authenticate", auth("\x00alice\x00pw"), 0, authed, false},
		}},
		{name: "v0 PLAIN raw", princ: "User:alice", steps: []step{
			{"handshake v0", hs(0, "PLAIN"), 0, none, true},
			{"raw token", auth("\x00alice\x00pw"), 0, authed, false},
		}},
		{name: "wrong password", closed: true, steps: []step{
			{"handshake", hs(1, "PLAIN"), 0, pre, false},
			{"authenticate", auth("\x00alice\x00nope"), kerr.SaslAuthenticationFailed.Code, none, false},
		}},
		{name: "unknown mechanism", closed: true, steps: []step{
			{"handshake", hs(1, "GSSAPI"), kerr.UnsupportedSaslMechanism.Code, none, false},
		}},
		{name: "authenticate without handshake", closed: true, steps: []step{
			{"authenticate", auth("\x00alice\x00pw"), kerr.IllegalSaslState.Code, none, false},
		}},
		{name: "handshake twice", closed: true, steps: []step{
			{"handshake", hs(1, "PLAIN"), 0, pre, false},
			{"handshake again", hs(1, "PLAIN"), kerr.IllegalSaslState.Code, none, false},
		}},
		{name: "v0 handshake once authenticated", princ: "User:alice", steps: []step{
			{"handshake", hs(1, "PLAIN"), 0, pre, false},
			{"authenticate", auth("\x00alice\x00pw"), 0, authed, false},
			{"v0 handshake", hs(0, "PLAIN"), kerr.IllegalSaslState.Code, authed, false},
		}},
	} {
		a, info, closed := newTestAuth(t, 0)
		for _, st := range tc.steps {
			if code := st.do(a, info); code != st.code {
				t.Errorf("%s/%s: code %d, want %d", tc.name, st.name, code, st.code)
			}
			for key, want := range st.admit {
				if got := a.Admits(key, now); got != want {
					t.Errorf("%s/%s: Admits(%d) = %v, want %v", tc.name, st.name, key, got, want)
				}
			}
			if a.Raw() != st.raw {
				t.Errorf("%s/%s: Raw() = %v", tc.name, st.name, a.Raw())
			}
			if wantPre := st.admit[3] == false && !a.authed.Load(); a.PreAuth() != wantPre && !a.failed.Load() {
				t.Errorf("%s/%s: PreAuth() = %v", tc.name, st.name, a.PreAuth())
			}
		}
		if tc.closed {
			if !closed.waitClosed() {
				t.Errorf("%s: not closed", tc.name)
			}
		} else if closed.n.Load() != 0 {
			t.Errorf("%s: closed", tc.name)
		}
		if info.Principal != tc.princ {
			t.Errorf("%s: principal %q, want %q", tc.name, info.Principal, tc.princ)
		}
	}
}

// TestConnAuthReauth: with connections.max.reauth.ms the session ends;
// past it only the SASL keys are admitted; re-authenticating as the same
// user renews it, as another user fails and closes.
func TestConnAuthReauth(t *testing.T) {
	ctx, now := context.Background(), time.Now()
	a, info, closed := newTestAuth(t, time.Minute)
	if code := a.handshake(ctx, info, 1, "PLAIN"); code != 0 {
		t.Fatal(code)
	}
	out := a.authenticate(ctx, info, []byte("\x00alice\x00pw"), now)
	if out.code != 0 || out.lifetime != time.Minute {
		t.Fatalf("login: %+v", out)
	}
	later := now.Add(time.Minute + time.Second)
	if !a.Admits(3, now.Add(59*time.Second)) || a.Admits(3, later) || !a.Admits(17, later) {
		t.Fatal("session lifetime not enforced")
	}
	if code := a.handshake(ctx, info, 1, "PLAIN"); code != 0 {
		t.Fatalf("reauth handshake: %d", code)
	}
	if out := a.authenticate(ctx, info, []byte("\x00alice\x00pw"), later); out.code != 0 || !a.Admits(3, later) {
		t.Fatalf("reauth: %+v", out)
	}
	// Another mechanism on re-authentication is refused, and closes.
	b, binfo, bclosed := newTestAuth(t, time.Minute)
	if code := b.handshake(ctx, binfo, 1, "PLAIN"); code != 0 {
		t.Fatal(code)
	}
	if out := b.authenticate(ctx, binfo, []byte("\x00alice\x00pw"), now); out.code != 0 {
		t.Fatal(out)
	}
	if code := b.handshake(ctx, binfo, 1, "SCRAM-SHA-512"); code != kerr.IllegalSaslState.Code || b.Admits(3, now) || !bclosed.waitClosed() {
		t.Fatalf("reauth with another mechanism: %d", code)
	}
	// Another principal on re-authentication is refused.
	a.mu.principal = "User:bob"
	if code := a.handshake(ctx, info, 1, "PLAIN"); code != 0 {
		t.Fatal(code)
	}
	if out := a.authenticate(ctx, info, []byte("\x00alice\x00pw"), later); out.code != kerr.SaslAuthenticationFailed.Code || a.Admits(3, later) {
		t.Fatalf("reauth as another principal: %+v", out)
	}
	if !closed.waitClosed() {
		t.Fatal("not closed after a refused re-authentication")
	}
}

// TestConnAuthHandshakeDuringStep: a SaslHandshake while a step holds the
// state (a PLAIN password being salted) does not wait for it: it is
// refused and the connection closed.
func TestConnAuthHandshakeDuringStep(t *testing.T) {
	a, info, closed := newTestAuth(t, 0)
	a.mu.Lock() // a step in flight
	code := a.handshake(context.Background(), info, 1, "PLAIN")
	a.mu.Unlock()
	if code != kerr.IllegalSaslState.Code || a.Admits(18, time.Now()) {
		t.Fatalf("handshake during a step: code %d", code)
	}
	if !closed.waitClosed() {
		t.Fatal("not closed")
	}
}
