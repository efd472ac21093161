package interop_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xdgscram "github.com/xdg-go/scram"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

func loopback(t *testing.T) string { return fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t)) }

// saslBroker starts a broker with a PLAINTEXT and a SASL_PLAINTEXT
// listener; extra flags are appended.
func saslBroker(t *testing.T, extra ...string) (b *brokertest.Broker, plainAddr, saslAddr string) {
	t.Helper()
	plainAddr, saslAddr = loopback(t), loopback(t)
	args := append([]string{"--listeners", "PLAINTEXT://" + plainAddr + ",SASL_PLAINTEXT://" + saslAddr}, extra...)
	return brokertest.StartAt(t, plainAddr, args...), plainAddr, saslAddr
}

func newClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// roundTrip produces n records to topic with cl and consumes them back
// with a second client made of the same options.
func roundTrip(t *testing.T, ctx context.Context, topic, tag string, opts ...kgo.Opt) {
	t.Helper()
	p := newClient(t, append(opts, kgo.DefaultProduceTopic(topic))...)
	const n = 20
	for i := range n {
		if err := p.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%s-%d", tag, i))).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", tag, err)
		}
	}
	c := newClient(t, append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	seen := 0
	for seen < n {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%s: consumed %d of %d: %v", tag, seen, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("%s: fetch: %v", tag, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Value), tag+"-") {
				seen++
			}
		})
	}
}

// pingErr is the error a client gets on its first request.
func pingErr(t *testing.T, addr string, m sasl.Mechanism) error {
	t.Helper()
	cl := newClient(t, kgo.SeedBrokers(addr), kgo.SASL(m), kgo.RequestRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err
}

// writeFrame writes a request frame (header v1: no tags) for req.
func writeFrame(t *testing.T, c net.Conn, corr int32, req kmsg.Request) {
	t.Helper()
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := c.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// readFrame reads one length-prefixed frame; an error when the
// connection closes or nothing comes within the deadline.
func readFrame(c net.Conn, within time.Duration) ([]byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(within))
	var lb [4]byte
	if _, err := io.ReadFull(c, lb[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(lb[:]))
	_, err := io.ReadFull(c, b)
	return b, err
}

// closedWithin reports whether the broker closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSASLPlaintextListener: a broker with PLAINTEXT and SASL_PLAINTEXT
// listeners; users created over PLAINTEXT with AlterUserScramCredentials;
// franz-go clients produce and consume over SASL_PLAINTEXT with
// SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; Metadata advertises each
// listener's own address; wrong passwords, unknown users, requests before
// authentication and a 1 MiB first frame are refused while other clients
// go on; the legacy SaslHandshake v0 framing works; a session past
// connections.max.reauth.ms is closed; failures are counted in
// regent_auth_failures_total.
func TestSASLPlaintextListener(t *testing.T) {
	metrics := loopback(t)
	_, plainAddr, saslAddr := saslBroker(t, "--metrics-listen", metrics, "--connections-max-reauth-ms", "1500")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(plainAddr)))
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-pw"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-pw"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 100, Password: "bob-pw"}, // too few iterations
	})
	if err != nil {
		t.Fatal(err)
	}
	if res["alice"].Err != nil || !errors.Is(res["bob"].Err, kerr.UnacceptableCredential) {
		t.Fatalf("alter results: alice %v, bob %v (want UNACCEPTABLE_CREDENTIAL)", res["alice"].Err, res["bob"].Err)
	}
	desc, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := desc["alice"]; d.Err != nil || len(d.CredInfos) != 2 || len(desc) != 1 {
		t.Fatalf("described: %+v", desc)
	}
	if d, _ := adm.DescribeUserSCRAMs(ctx, "nobody"); !errors.Is(d["nobody"].Err, kerr.ResourceNotFound) {
		t.Fatalf("describe unknown user: %+v", d)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "sasl-topic"); err != nil {
		t.Fatal(err)
	}

	scram256 := scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism()
	scram512 := scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism()
	plainM := plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism()
	for _, m := range []sasl.Mechanism{scram256, scram512, plainM} {
		roundTrip(t, ctx, "sasl-topic", m.Name(), kgo.SeedBrokers(saslAddr), kgo.SASL(m))
	}

	// Each listener advertises itself.
	for _, tc := range []struct {
		addr string
		opts []kgo.Opt
	}{{plainAddr, nil}, {saslAddr, []kgo.Opt{kgo.SASL(scram512)}}} {
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, newClient(t, append(tc.opts, kgo.SeedBrokers(tc.addr))...))
		if err != nil {
			t.Fatal(err)
		}
		if got := net.JoinHostPort(md.Brokers[0].Host, fmt.Sprint(md.Brokers[0].Port)); got != tc.addr {
			t.Errorf("Metadata on %s advertises %s", tc.addr, got)
		}
		cl := newClient(t, append(tc.opts, kgo.SeedBrokers(tc.addr))...)
		dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := net.JoinHostPort(dc.Brokers[0].Host, fmt.Sprint(dc.Brokers[0].Port)); got != tc.addr {
			t.Errorf("DescribeCluster on %s advertises %s", tc.addr, got)
		}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey, fc.CoordinatorKeys = "g", []string{"g"}
		fcr, err := fc.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(fcr.Coordinators) > 0 {
			if c := fcr.Coordinators[0]; net.JoinHostPort(c.Host, fmt.Sprint(c.Port)) != tc.addr {
				t.Errorf("FindCoordinator on %s gives %s:%d", tc.addr, c.Host, c.Port)
			}
		} else if got := net.JoinHostPort(fcr.Host, fmt.Sprint(fcr.Port)); got != tc.addr {
			t.Errorf("FindCoordinator on %s gives %s", tc.addr, got)
		}
	}

	// Refusals.
	for name, m := range map[string]sasl.Mechanism{
		"wrong password (SCRAM-SHA-256)": scram.Auth{User: "alice", Pass: "nope"}.AsSha256Mechanism(),
		"wrong password (SCRAM-SHA-512)": scram.Auth{User: "alice", Pass: "nope"}.AsSha512Mechanism(),
		"wrong password (PLAIN)":         plain.Auth{User: "alice", Pass: "nope"}.AsMechanism(),
		"unknown user (SCRAM-SHA-512)":   scram.Auth{User: "mallory", Pass: "x"}.AsSha512Mechanism(),
		"unknown user (PLAIN)":           plain.Auth{User: "mallory", Pass: "x"}.AsMechanism(),
	} {
		if err := pingErr(t, saslAddr, m); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}
	// A request before authentication closes the connection.
	c := dial(t, saslAddr)
	writeFrame(t, c, 1, kmsg.NewPtrMetadataRequest())
	if !closedWithin(c, 5*time.Second) {
		t.Error("Metadata before authentication: connection left open")
	}
	// A 1 MiB first frame closes the connection, before it is read.
	c = dial(t, saslAddr)
	big := make([]byte, 4+1<<20)
	binary.BigEndian.PutUint32(big, 1<<20)
	go func() { _, _ = c.Write(big) }()
	if !closedWithin(c, 5*time.Second) {
		t.Error("1 MiB first frame: connection left open")
	}

	// Legacy framing: SaslHandshake v0, then a raw PLAIN token, answered
	// with an empty raw token; then requests are served.
	legacy := func(pass string) net.Conn {
		c := dial(t, saslAddr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 0, "PLAIN"
		writeFrame(t, c, 1, hs)
		b, err := readFrame(c, 5*time.Second)
		if err != nil || len(b) < 6 || binary.BigEndian.Uint16(b[4:]) != 0 {
			t.Fatalf("SaslHandshake v0: %x %v", b, err)
		}
		tok := append(binary.BigEndian.AppendUint32(nil, uint32(len(pass)+7)), "\x00alice\x00"+pass...)
		if _, err := c.Write(tok); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c = legacy("alice-pw")
	if b, err := readFrame(c, 10*time.Second); err != nil || len(b) != 0 {
		t.Fatalf("legacy PLAIN: reply %x, %v; want an empty token", b, err)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	writeFrame(t, c, 2, md)
	if b, err := readFrame(c, 5*time.Second); err != nil || binary.BigEndian.Uint32(b) != 2 {
		t.Fatalf("Metadata after legacy PLAIN: %v", err)
	}
	if c = legacy("wrong"); !closedWithin(c, 5*time.Second) {
		t.Error("legacy PLAIN with a wrong password: connection left open")
	}
	// Legacy framing with SCRAM-SHA-512: two raw round trips, the server's
	// signature checked by xdg-go/scram's client.
	c = dial(t, saslAddr)
	hs0 := kmsg.NewPtrSASLHandshakeRequest()
	hs0.Version, hs0.Mechanism = 0, "SCRAM-SHA-512"
	writeFrame(t, c, 1, hs0)
	if b, err := readFrame(c, 5*time.Second); err != nil || binary.BigEndian.Uint16(b[4:]) != 0 {
		t.Fatalf("SaslHandshake v0 SCRAM-SHA-512: %x %v", b, err)
	}
	sc, err := xdgscram.SHA512.NewClient("alice", "alice-pw", "")
	if err != nil {
		t.Fatal(err)
	}
	conv := sc.NewConversation()
	msg, err := conv.Step("")
	for i := 0; err == nil && !conv.Done() && i < 3; i++ {
		if _, werr := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...)); werr != nil {
			t.Fatal(werr)
		}
		b, rerr := readFrame(c, 10*time.Second)
		if rerr != nil {
			t.Fatalf("legacy SCRAM step %d: %v", i, rerr)
		}
		msg, err = conv.Step(string(b))
	}
	if err != nil || !conv.Valid() {
		t.Fatalf("legacy SCRAM-SHA-512: %v (valid %v)", err, conv.Valid())
	}
	writeFrame(t, c, 2, md)
	if b, err := readFrame(c, 5*time.Second); err != nil || binary.BigEndian.Uint32(b) != 2 {
		t.Fatalf("Metadata after legacy SCRAM: %v", err)
	}

	// KIP-368: SaslAuthenticate v1 tells the session lifetime; past it
	// without re-authenticating, the next request closes the connection.
	c = dial(t, saslAddr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	writeFrame(t, c, 1, hs)
	if _, err := readFrame(c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("\x00alice\x00alice-pw")
	authAt := time.Now()
	writeFrame(t, c, 2, au)
	b, err := readFrame(c, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	ar.Version = 1
	if err := ar.ReadFrom(b[4:]); err != nil || ar.ErrorCode != 0 || ar.SessionLifetimeMillis <= 0 || ar.SessionLifetimeMillis > 1500 {
		t.Fatalf("SaslAuthenticate v1: %+v %v", ar, err)
	}
	var closedAt time.Time
	testwait.For(t, "the expired session's connection to be closed", 10*time.Second, func() bool {
		writeFrame(t, c, 3, md)
		if _, err := readFrame(c, 200*time.Millisecond); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return false
			}
			closedAt = time.Now()
			return true
		}
		return false
	})
	if closedAt.Sub(authAt) < 1400*time.Millisecond {
		t.Errorf("closed %v after authenticating, before the 1.5 s session ended", closedAt.Sub(authAt))
	}
	// A franz-go client re-authenticates on its own and goes on.
	p := newClient(t, kgo.SeedBrokers(saslAddr), kgo.SASL(scram512), kgo.DefaultProduceTopic("sasl-topic"))
	start := time.Now()
	// Producing for over two session lifetimes (bounded in count too).
	for i := 0; time.Since(start) < 4*time.Second && i < 100000; i++ {
		if err := p.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("reauth-", i))).FirstErr(); err != nil {
			t.Fatalf("produce %d across re-authentications: %v", i, err)
		}
	}

	// The broker is unaffected; failures are counted.
	roundTrip(t, ctx, "sasl-topic", "after", kgo.SeedBrokers(saslAddr), kgo.SASL(scram256))
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`regent_auth_failures_total{mechanism="SCRAM-SHA-256"`, `reason="bad_password"`, `reason="unknown_user"`, `mechanism="PLAIN"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(string(body), "auth_failures"))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestSASLOfflineAdminAndOAuthBearer: a first admin written with `regent
// users add` into a stopped broker's data directory logs in with
// SCRAM-SHA-512; OAUTHBEARER accepts a JWT signed by a key of the JWKS
// file and refuses expired, forged and wrong-audience ones; a mechanism
// not enabled is refused.
func TestSASLOfflineAdminAndOAuthBearer(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	out, err := exec.Command(brokertest.Binary(t), "users", "add", "admin", "--mechanism", "SCRAM-SHA-512", "--password-file", pw, "--data", data).CombinedOutput()
	if err != nil {
		t.Fatalf("regent users add: %v\n%s", err, out)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks := filepath.Join(dir, "jwks.json")
	raw, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}}})
	if err := os.WriteFile(jwks, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	plainAddr, saslAddr := loopback(t), loopback(t)
	b := brokertest.StartIn(t, data, plainAddr, "--listeners", "PLAINTEXT://"+plainAddr+",SASL_PLAINTEXT://"+saslAddr,
		"--sasl-mechanisms", "SCRAM-SHA-512,OAUTHBEARER", "--sasl-oauthbearer-jwks", jwks,
		"--sasl-oauthbearer-issuer", "https://issuer.test", "--sasl-oauthbearer-audience", "regent")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	admin := scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()
	if _, err := kadm.NewClient(newClient(t, kgo.SeedBrokers(saslAddr), kgo.SASL(admin))).CreateTopic(ctx, 1, 1, nil, "oauth-topic"); err != nil {
		t.Fatalf("the offline admin: %v", err)
	}
	if err := pingErr(t, saslAddr, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Errorf("PLAIN, not enabled: %v, want UNSUPPORTED_SASL_MECHANISM", err)
	}

	sign := func(k *ecdsa.PrivateKey, c jwt.Claims) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jwt.Signed(s).Claims(c).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	now := time.Now()
	good := jwt.Claims{Subject: "svc", Issuer: "https://issuer.test", Audience: jwt.Audience{"regent"}, Expiry: jwt.NewNumericDate(now.Add(time.Hour))}
	bearer := func(tok string) sasl.Mechanism { return oauth.Auth{Token: tok}.AsMechanism() }
	roundTrip(t, ctx, "oauth-topic", "oauth", kgo.SeedBrokers(saslAddr), kgo.SASL(bearer(sign(key, good))))

	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	expired, aud := good, good
	expired.Expiry = jwt.NewNumericDate(now.Add(-time.Hour))
	aud.Audience = jwt.Audience{"someone-else"}
	for name, tok := range map[string]string{
		"expired":        sign(key, expired),
		"forged":         sign(other, good),
		"wrong audience": sign(key, aud),
	} {
		if err := pingErr(t, saslAddr, bearer(tok)); !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid_token") {
			t.Errorf("%s token: %v, want SASL_AUTHENTICATION_FAILED (invalid_token)", name, err)
		}
	}

	// Key rotation: the JWKS file gets the other key, SIGHUP reloads it;
	// its tokens are accepted from then on.
	raw, _ = json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &other.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}}})
	if err := os.WriteFile(jwks, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(b.PID(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "a token of the rotated key accepted after SIGHUP", 20*time.Second, func() bool {
		return pingErr(t, saslAddr, bearer(sign(other, good))) == nil
	})
	if err := pingErr(t, saslAddr, bearer(sign(key, good))); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("the retired key's token after the reload: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// TestKafkaConfigsUsers: Kafka's own kafka-configs (4.3) adds, describes
// and deletes SCRAM credentials through a PLAINTEXT listener, and the
// user it made logs in over SASL_PLAINTEXT with SCRAM-SHA-512 (and, with
// the credential deleted, no longer does).
func TestKafkaConfigsUsers(t *testing.T) {
	lib := kafkaLib(t)
	_, plainAddr, saslAddr := saslBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const configs = "kafka.admin.ConfigCommand"
	kafkaTool(t, ctx, lib, configs, "--bootstrap-server", plainAddr, "--alter", "--entity-type", "users", "--entity-name", "carol",
		"--add-config", "SCRAM-SHA-512=[iterations=8192,password=carol-secret],SCRAM-SHA-256=[password=carol-secret]")
	out := kafkaTool(t, ctx, lib, configs, "--bootstrap-server", plainAddr, "--describe", "--entity-type", "users", "--entity-name", "carol")
	if !strings.Contains(out, "SCRAM-SHA-512=iterations=8192") || !strings.Contains(out, "SCRAM-SHA-256=iterations=4096") {
		t.Fatalf("kafka-configs --describe users:\n%s", out)
	}
	if err := pingErr(t, saslAddr, scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha512Mechanism()); err != nil {
		t.Fatalf("carol over SCRAM-SHA-512: %v", err)
	}
	kafkaTool(t, ctx, lib, configs, "--bootstrap-server", plainAddr, "--alter", "--entity-type", "users", "--entity-name", "carol", "--delete-config", "SCRAM-SHA-512")
	out = kafkaTool(t, ctx, lib, configs, "--bootstrap-server", plainAddr, "--describe", "--entity-type", "users", "--entity-name", "carol")
	if strings.Contains(out, "SCRAM-SHA-512") || !strings.Contains(out, "SCRAM-SHA-256") {
		t.Fatalf("after --delete-config SCRAM-SHA-512:\n%s", out)
	}
	if err := pingErr(t, saslAddr, scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha512Mechanism()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("carol over SCRAM-SHA-512 after the delete: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if err := pingErr(t, saslAddr, scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism()); err != nil {
		t.Errorf("carol over SCRAM-SHA-256: %v", err)
	}
}

// TestSASLKcatAndPython: kcat (librdkafka 2.0) produces and consumes over
// SASL_PLAINTEXT with PLAIN and SCRAM-SHA-256, and Debian's Python clients
// (confluent-kafka, kafka-python) do the same (interop/python/sasl_roundtrip.py).
func TestSASLKcatAndPython(t *testing.T) {
	kcat := needTool(t, "kcat")
	_, plainAddr, saslAddr := saslBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(plainAddr)))
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "dave", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "dave-pw"},
	})
	if err != nil || res["dave"].Err != nil {
		t.Fatalf("create dave: %v %v", err, res["dave"].Err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "sasl-clients"); err != nil {
		t.Fatal(err)
	}
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256"} {
		kcatSASLRoundTrip(ctx, t, kcat, "sasl-clients", mech, 500,
			"-b", saslAddr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms="+mech, "-X", "sasl.username=dave", "-X", "sasl.password=dave-pw")
	}
	t.Log("kcat: PLAIN and SCRAM-SHA-256 x 500 lines produced and consumed; wrong password refused")

	py := needPython(t, "confluent_kafka", "kafka")
	out, err := exec.CommandContext(ctx, py, "python/sasl_roundtrip.py", saslAddr, "sasl-clients", "dave", "dave-pw").CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python SASL round trip: %v", err)
	}
}

// TestSASLJavaClient: Kafka's Java client (4.3) producer, consumer group
// and Admin over SASL_PLAINTEXT with SCRAM-SHA-512, PLAIN and OAUTHBEARER
// (a JWT signed by a key of the broker's JWKS, read from a file through
// Kafka's file:// token endpoint).
func TestSASLJavaClient(t *testing.T) {
	lib := kafkaLib(t)
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks := filepath.Join(dir, "jwks.json")
	raw, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}}})
	if err := os.WriteFile(jwks, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	_, plainAddr, saslAddr := saslBroker(t, "--sasl-mechanisms", "SCRAM-SHA-512,PLAIN,OAUTHBEARER", "--sasl-oauthbearer-jwks", jwks, "--sasl-oauthbearer-audience", "regent")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(plainAddr)))
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "java", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "java-pw"}}); err != nil || res["java"].Err != nil {
		t.Fatalf("create java: %v %v", err, res["java"].Err)
	}
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "java-sasl"); err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(signer).Claims(jwt.Claims{Subject: "java-svc", Audience: jwt.Audience{"regent"}, IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(dir, "token.jwt")
	if err := os.WriteFile(tokFile, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	src, _ := filepath.Abs(filepath.Join("javaclients", "SaslClient.java"))
	log4j, _ := filepath.Abs(filepath.Join("..", "bench", "log4j2.properties"))
	for _, tc := range []struct{ mech, user, secret string }{
		{"SCRAM-SHA-512", "java", "java-pw"},
		{"PLAIN", "java", "java-pw"},
		{"OAUTHBEARER", "", tokFile},
	} {
		cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-Dlog4j2.configurationFile="+log4j,
			"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file://"+tokFile,
			"-cp", filepath.Join(lib, "*"), src, saslAddr, "java-sasl", "group-"+tc.mech, tc.mech, tc.user, tc.secret)
		out, err := cmd.CombinedOutput()
		t.Logf("Java client over SASL_PLAINTEXT/%s: %s", tc.mech, grepLines(string(out), " ok"))
		for _, want := range []string{"produce ok", "consume ok", "admin ok"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("Java client %s: no %q (%v):\n%s", tc.mech, want, err, out)
				break
			}
		}
	}
}

// TestSASLLoginFlood: 64 connections logging in with wrong PLAIN passwords
// as fast as they are refused, for 5 s, while an authenticated client
// produces: every record is acknowledged, and the latencies are logged.
func TestSASLLoginFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("flood: not in -short")
	}
	_, plainAddr, saslAddr := saslBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(plainAddr)))
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "erin", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "erin-pw"}}); err != nil || res["erin"].Err != nil {
		t.Fatalf("create erin: %v %v", err, res["erin"].Err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "flood"); err != nil {
		t.Fatal(err)
	}
	p := newClient(t, kgo.SeedBrokers(saslAddr), kgo.SASL(scram.Auth{User: "erin", Pass: "erin-pw"}.AsSha512Mechanism()), kgo.DefaultProduceTopic("flood"))
	if err := p.ProduceSync(ctx, kgo.StringRecord("warm")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	const attackers, dur = 64, 5 * time.Second
	stop := time.Now().Add(dur)
	refused := make(chan int, attackers)
	for range attackers {
		go func() {
			n := 0
			for time.Now().Before(stop) && n < 10000 {
				c, err := net.DialTimeout("tcp", saslAddr, time.Second)
				if err != nil {
					continue
				}
				hs := kmsg.NewPtrSASLHandshakeRequest()
				hs.Version, hs.Mechanism = 1, "PLAIN"
				au := kmsg.NewPtrSASLAuthenticateRequest()
				au.Version, au.SASLAuthBytes = 1, []byte("\x00erin\x00guess")
				var b []byte
				for i, r := range []kmsg.Request{hs, au} {
					f := binary.BigEndian.AppendUint32(nil, 0)
					f = binary.BigEndian.AppendUint16(f, uint16(r.Key()))
					f = binary.BigEndian.AppendUint16(f, uint16(r.GetVersion()))
					f = binary.BigEndian.AppendUint32(f, uint32(i))
					f = binary.BigEndian.AppendUint16(f, 1)
					f = append(f, 'x')
					f = r.AppendTo(f)
					binary.BigEndian.PutUint32(f, uint32(len(f)-4))
					b = append(b, f...)
				}
				_, _ = c.Write(b)
				_, _ = readFrame(c, 10*time.Second) // handshake
				if r, err := readFrame(c, 10*time.Second); err == nil && len(r) > 6 && binary.BigEndian.Uint16(r[4:]) == uint16(kerr.SaslAuthenticationFailed.Code) {
					n++
				}
				c.Close()
			}
			refused <- n
		}()
	}
	var lat []time.Duration
	for i := 0; time.Now().Before(stop) && i < 100000; i++ {
		start := time.Now()
		if err := p.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("r", i))).FirstErr(); err != nil {
			t.Fatalf("produce %d during the flood: %v", i, err)
		}
		lat = append(lat, time.Since(start))
	}
	total := 0
	for range attackers {
		total += <-refused
	}
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	t.Logf("login flood: %d wrong PLAIN logins refused in %v by %d connections (%.0f/s); meanwhile %d acks=all produces, latency p50 %v p99 %v max %v",
		total, dur, attackers, float64(total)/dur.Seconds(), len(lat), q(0.5), q(0.99), lat[len(lat)-1])
	if total == 0 {
		t.Error("no login was refused")
	}
}

// kcatSASLRoundTrip produces n lines to topic with kcat using sec (whose
// last element must be the sasl.password setting), consumes them back, and
// checks that the same settings with a wrong password are refused.
func kcatSASLRoundTrip(ctx context.Context, t *testing.T, kcat, topic, mech string, n int, sec ...string) {
	t.Helper()
	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, "kcat-%s-%d\n", mech, i)
	}
	prod := exec.CommandContext(ctx, kcat, append(slices.Clone(sec), "-t", topic, "-P")...)
	prod.Stdin = bytes.NewReader(in.Bytes())
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce %s: %v\n%s", mech, err, out)
	}
	out, err := exec.CommandContext(ctx, kcat, append(slices.Clone(sec), "-t", topic, "-C", "-o", "beginning", "-e", "-q")...).Output()
	if err != nil {
		t.Fatalf("kcat consume %s: %v", mech, err)
	}
	if !bytes.Contains(out, in.Bytes()) {
		t.Fatalf("kcat %s: consumed %d bytes without the %d produced", mech, len(out), in.Len())
	}
	bad := append(slices.Clone(sec[:len(sec)-1]), "sasl.password=wrong", "-L")
	if out, err := exec.CommandContext(ctx, kcat, bad...).CombinedOutput(); err == nil {
		t.Errorf("kcat %s with a wrong password listed metadata:\n%s", mech, out)
	}
}
