package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testClock is a settable clock for linkAuth.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

func testAuth(t *testing.T, secret string, clock *testClock) *linkAuth {
	t.Helper()
	a, err := newLinkAuth([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	a.now = clock.now
	return a
}

// signed is a request signed by a, with its body.
func signed(t *testing.T, a *linkAuth, method, url string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	a.sign(req, body)
	return req
}

// TestLinkAuthVerify: a signature checks out only with the same secret,
// method, URI and body, within the clock skew, and once.
func TestLinkAuthVerify(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_700_000_000_000)}
	const secret = "0123456789abcdef0123456789abcdef-node-secret"
	signer := testAuth(t, secret, clock)
	body := []byte(`{"key":30,"principal":"User:admin"}`)
	uri := "/kafka/forward"

	fresh := func() *linkAuth { return testAuth(t, secret, clock) }
	cases := []struct {
		name     string
		verifier *linkAuth
		method   string
		uri      string
		body     []byte
		at       time.Duration // the verifier's clock minus the signer's
		edit     func(h http.Header)
		want     error
	}{
		{name: "good", verifier: fresh(), method: "POST", uri: uri, body: body},
		{name: "within skew", verifier: fresh(), method: "POST", uri: uri, body: body, at: linkSkew - time.Second},
		{name: "signer ahead within skew", verifier: fresh(), method: "POST", uri: uri, body: body, at: -linkSkew + time.Second},
		{name: "wrong secret", verifier: testAuth(t, "another-secret-of-at-least-32-bytes!", clock), method: "POST", uri: uri, body: body, want: errBadSig},
		{name: "expired", verifier: fresh(), method: "POST", uri: uri, body: body, at: linkSkew + time.Second, want: errStale},
		{name: "from the future", verifier: fresh(), method: "POST", uri: uri, body: body, at: -linkSkew - time.Second, want: errStale},
		{name: "tampered body", verifier: fresh(), method: "POST", uri: uri, body: []byte(`{"key":30,"principal":"User:root"}`), want: errBadSig},
		{name: "no body", verifier: fresh(), method: "POST", uri: uri, want: errBadSig},
		{name: "other path", verifier: fresh(), method: "POST", uri: "/acls/forward", body: body, want: errBadSig},
		{name: "other method", verifier: fresh(), method: "DELETE", uri: uri, body: body, want: errBadSig},
		{name: "tampered timestamp", verifier: fresh(), method: "POST", uri: uri, body: body, edit: func(h http.Header) {
			h.Set(sigTimestampHeader, fmt.Sprint(clock.t.UnixMilli()+1))
		}, want: errBadSig},
		{name: "tampered nonce", verifier: fresh(), method: "POST", uri: uri, body: body, edit: func(h http.Header) {
			h.Set(sigNonceHeader, "00")
		}, want: errBadSig},
		{name: "signature not hex", verifier: fresh(), method: "POST", uri: uri, body: body, edit: func(h http.Header) {
			h.Set(sigHeader, "zz")
		}, want: errBadSig},
		{name: "unsigned", verifier: fresh(), method: "POST", uri: uri, body: body, edit: func(h http.Header) {
			h.Del(sigHeader)
		}, want: errUnsigned},
		{name: "no timestamp", verifier: fresh(), method: "POST", uri: uri, body: body, edit: func(h http.Header) {
			h.Del(sigTimestampHeader)
		}, want: errUnsigned},
		{name: "bad timestamp", verifier: fresh(), method: "POST", uri: uri, body: body, edit: func(h http.Header) {
			h.Set(sigTimestampHeader, "soon")
		}, want: errUnsigned},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := signed(t, signer, "POST", "http://127.0.0.1:1"+uri, body)
			if c.edit != nil {
				c.edit(req.Header)
			}
			vclock := &testClock{t: clock.t.Add(c.at)}
			c.verifier.now = vclock.now
			err := c.verifier.verify(c.method, c.uri, req.Header, c.body)
			if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("verify: %v, want %v", err, c.want)
			}
		})
	}
}

// TestLinkAuthReplay: a signed request is accepted once; its nonce is
// forgotten only when its timestamp has left the window (it is then
// stale). A full nonce cache refuses new requests until entries expire.
func TestLinkAuthReplay(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_700_000_000_000)}
	a := testAuth(t, strings.Repeat("s", minSecretBytes), clock)
	body := []byte("x")
	req := signed(t, a, "POST", "http://127.0.0.1:1/cluster/voters", body)
	if err := a.verify("POST", "/cluster/voters", req.Header, body); err != nil {
		t.Fatalf("first: %v", err)
	}
	clock.t = clock.t.Add(linkSkew / 2)
	if err := a.verify("POST", "/cluster/voters", req.Header, body); !errors.Is(err, errReplay) {
		t.Fatalf("replayed: %v, want %v", err, errReplay)
	}
	clock.t = clock.t.Add(linkSkew)
	if err := a.verify("POST", "/cluster/voters", req.Header, body); !errors.Is(err, errStale) {
		t.Fatalf("replayed after the window: %v, want %v", err, errStale)
	}

	a = testAuth(t, strings.Repeat("s", minSecretBytes), clock)
	for i := range maxNonces {
		a.mu.seen[fmt.Sprint(i)] = clock.t.Add(time.Second)
	}
	req = signed(t, a, "POST", "http://127.0.0.1:1/cluster/voters", body)
	if err := a.verify("POST", "/cluster/voters", req.Header, body); !errors.Is(err, errNonceFlood) {
		t.Fatalf("full cache: %v, want %v", err, errNonceFlood)
	}
	clock.t = clock.t.Add(2 * time.Second)
	req = signed(t, a, "POST", "http://127.0.0.1:1/cluster/voters", body)
	if err := a.verify("POST", "/cluster/voters", req.Header, body); err != nil {
		t.Fatalf("after the cache's entries expired: %v", err)
	}
	if n := len(a.mu.seen); n != 1 {
		t.Fatalf("%d nonces kept, want 1", n)
	}
}

// TestSecretFile: the file's content without surrounding space is the
// secret; a short one is refused, and no error shows the secret.
func TestSecretFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	secret := newSecret()
	if err := os.WriteFile(good, []byte("  "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := readSecretFile(good)
	if err != nil || string(a.secret) != secret {
		t.Fatalf("read %q: %v", a.secret, err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("hunter2-hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readSecretFile(short); !errors.Is(err, errSecretShort) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("short secret: %v", err)
	}
	if _, err := readSecretFile(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing file was read")
	}
	if newSecret() == secret {
		t.Fatal("two secrets alike")
	}
}

// TestGuard: the admin endpoint's wrapper refuses an unsigned or wrongly
// signed request (401) and a body over the limit (413) without calling
// the handler, and hands a signed request's body to it.
func TestGuard(t *testing.T) {
	clock := &testClock{t: time.Now()}
	a := testAuth(t, strings.Repeat("k", minSecretBytes), clock)
	var served [][]byte
	const limit = 1 << 10
	h := a.guard(limit, slog.New(slog.DiscardHandler), func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		served = append(served, b)
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Timeout: 10 * time.Second}
	do := func(req *http.Request) int {
		t.Helper()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	body := []byte(`{"id":4}`)
	if code := do(signed(t, a, "POST", srv.URL+"/cluster/voters", body)); code != http.StatusOK {
		t.Fatalf("signed: %d", code)
	}
	unsigned, _ := http.NewRequest("POST", srv.URL+"/cluster/voters", bytes.NewReader(body))
	if code := do(unsigned); code != http.StatusUnauthorized {
		t.Fatalf("unsigned: %d", code)
	}
	other := testAuth(t, strings.Repeat("o", minSecretBytes), clock)
	if code := do(signed(t, other, "POST", srv.URL+"/cluster/voters", body)); code != http.StatusUnauthorized {
		t.Fatalf("other secret: %d", code)
	}
	big := bytes.Repeat([]byte("a"), limit+1)
	if code := do(signed(t, a, "POST", srv.URL+"/cluster/voters", big)); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("body over the limit: %d", code)
	}
	if len(served) != 1 || !bytes.Equal(served[0], body) {
		t.Fatalf("the handler served %q", served)
	}
	// Without a secret (mutual TLS alone) the size is still bounded.
	var none *linkAuth
	open := httptest.NewServer(none.guard(limit, slog.New(slog.DiscardHandler), func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	defer open.Close()
	req, _ := http.NewRequest("POST", open.URL+"/kafka/forward", bytes.NewReader(big))
	if code := do(req); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("body over the limit without a secret: %d", code)
	}
}

// TestClusterSecretConfig: a cluster node's plaintext admin endpoint needs
// the cluster secret or cluster TLS; the secret is for cluster nodes.
func TestClusterSecretConfig(t *testing.T) {
	node := []string{"--node-id", "1", "--raft-listen", "127.0.0.1:19093", "--admin-listen", "127.0.0.1:19300"}
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{args: node, wantErr: "--cluster-secret-file"},
		{args: append(node[:4:4], "--cluster-secret-file", "s")}, // no admin endpoint
		{args: append(node[:len(node):len(node)], "--cluster-secret-file", "s")},
		{args: append(node[:len(node):len(node)], "--cluster-tls-cert", "c.pem", "--cluster-tls-key", "k.pem", "--cluster-tls-ca", "ca.pem")},
		{args: node[:4]}, // a cluster node without an admin endpoint
		{args: []string{"--cluster-secret-file", "s"}, wantErr: "--raft-listen"},
	} {
		_, err := parseConfig(tc.args, noEnv)
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}

// TestClusterSecretCommand: `regent cluster secret` prints a new secret
// long enough for --cluster-secret-file.
func TestClusterSecretCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := clusterCommand([]string{"secret"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if s := strings.TrimSpace(out.String()); len(s) < minSecretBytes {
		t.Fatalf("secret %q too short", s)
	}
}

// TestLinkAuthRotation: a node given a second secret to accept verifies
// signatures made with either, signs with its own, and refuses others;
// the second file is read and checked like the first.
func TestLinkAuthRotation(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_700_000_000_000)}
	const oldSecret, newSecret = "old-secret-0123456789abcdef-0123456789", "new-secret-0123456789abcdef-0123456789"
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rotating, err := readSecretFiles(write("new", newSecret), write("old", oldSecret))
	if err != nil {
		t.Fatal(err)
	}
	rotating.now = clock.now
	body := []byte(`{"id":4}`)
	verify := func(v *linkAuth, req *http.Request) error {
		return v.verify(req.Method, req.URL.RequestURI(), req.Header, body)
	}
	for name, signer := range map[string]*linkAuth{
		"old": testAuth(t, oldSecret, clock),
		"new": testAuth(t, newSecret, clock),
	} {
		if err := verify(rotating, signed(t, signer, "POST", "http://n/raft/voters", body)); err != nil {
			t.Errorf("signed with the %s secret: %v", name, err)
		}
	}
	if err := verify(rotating, signed(t, testAuth(t, "another-secret-0123456789abcdef-012345", clock), "POST", "http://n/raft/voters", body)); !errors.Is(err, errBadSig) {
		t.Errorf("signed with another secret: %v, want %v", err, errBadSig)
	}
	// It signs with its own secret, which a node on the new one alone
	// accepts and a node on the old one alone does not.
	req := signed(t, rotating, "POST", "http://n/raft/voters", body)
	if err := verify(testAuth(t, newSecret, clock), req); err != nil {
		t.Errorf("its signature on a node with the new secret: %v", err)
	}
	if err := verify(testAuth(t, oldSecret, clock), signed(t, rotating, "POST", "http://n/raft/voters", body)); !errors.Is(err, errBadSig) {
		t.Errorf("its signature on a node with the old secret alone: %v, want %v", err, errBadSig)
	}
	if got := rotating.raftSecrets(); len(got) != 2 || string(got[0]) != newSecret || string(got[1]) != oldSecret {
		t.Errorf("raft secrets %q, want the node's own first", got)
	}
	if _, err := readSecretFiles(write("own", newSecret), write("short", "hunter2")); !errors.Is(err, errSecretShort) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a short accepted secret: %v", err)
	}
	if _, err := readSecretFiles(write("own2", newSecret), filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing accepted-secret file was read")
	}
}
