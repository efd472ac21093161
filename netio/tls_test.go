package netio

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/netio/certs"
	"github.com/regent-broker/regent/netio/tlstest"
	"github.com/regent-broker/regent/protocol"
)

// tlsFixture is a CA with a server certificate and a client one (CN
// "alice"), in a temp dir.
type tlsFixture struct {
	ca     *tlstest.CA
	server tlstest.Pair
	client tlstest.Pair
}

func newTLSFixture(t testing.TB) tlsFixture {
	t.Helper()
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Server("server")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ca.Client("alice", "alice")
	if err != nil {
		t.Fatal(err)
	}
	return tlsFixture{ca: ca, server: srv, client: cli}
}

func (f tlsFixture) store(t *testing.T, auth certs.ClientAuth) *certs.Store {
	t.Helper()
	cs, err := certs.New(certs.Files{Cert: f.server.CertFile, Key: f.server.KeyFile, CA: f.ca.CertFile, ClientAuth: auth})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// clientConfig trusts caFile and presents cert (zero: none).
func clientConfig(t testing.TB, caFile string, cert tlstest.Pair) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if cert.CertFile != "" {
		c, err := tls.LoadX509KeyPair(cert.CertFile, cert.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("tls dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

func TestTLSResponsesInRequestOrder(t *testing.T) {
	f := newTLSFixture(t)
	addr, _ := startServerWith(t, Config{MaxInFlight: 16, TLS: f.store(t, certs.ClientAuthNone).ServerConfig()}, slowHandler{})
	c := dialTLS(t, addr, clientConfig(t, f.ca.CertFile, tlstest.Pair{}))
	const n = 500 // more than MaxInFlight: exercises pausing and waking
	go func() {
		for i := int32(0); i < n; i++ {
			if _, err := c.Write(apiVersionsFrame(i)); err != nil {
				return
			}
		}
	}()
	r := bufio.NewReader(c)
	for i := int32(0); i < n; i++ {
		if got := readCorrelation(t, r); got != i {
			t.Fatalf("response %d carries correlation id %d", i, got)
		}
	}
}

// TestTLSManyConnectionsInFlight runs connections in parallel, each with
// many requests in flight, and checks every answer's order.
func TestTLSManyConnectionsInFlight(t *testing.T) {
	f := newTLSFixture(t)
	addr, srv := startServerWith(t, Config{TLS: f.store(t, certs.ClientAuthNone).ServerConfig()}, slowHandler{})
	cfg := clientConfig(t, f.ca.CertFile, tlstest.Pair{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for k := 0; k < 8; k++ {
		c := dialTLS(t, addr, cfg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var batch []byte
			for i := int32(0); i < 100; i++ {
				batch = append(batch, apiVersionsFrame(i)...)
			}
			if _, err := c.Write(batch); err != nil {
				errs <- err
				return
			}
			r := bufio.NewReader(c)
			for i := int32(0); i < 100; i++ {
				var hdr [8]byte
				if _, err := io.ReadFull(r, hdr[:]); err != nil {
					errs <- err
					return
				}
				if _, err := r.Discard(int(binary.BigEndian.Uint32(hdr[:4])) - 4); err != nil {
					errs <- err
					return
				}
				if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != i {
					errs <- fmt.Errorf("response %d carries correlation id %d", i, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := srv.OpenConnections(); got != 8 {
		t.Fatalf("open connections %d, want 8", got)
	}
}

// TestTLSRefusals: a 1 MiB first frame before SASL authentication, and
// plaintext bytes sent to the TLS port, are refused; a client already
// connected keeps being served and the budgets end empty.
func TestTLSRefusals(t *testing.T) {
	f := newTLSFixture(t)
	l := &protocol.Listener{Name: "SASL_SSL", Security: protocol.SASLSSL, SASL: &protocol.SASLConfig{}}
	addr, srv := startServerWith(t, Config{TLS: f.store(t, certs.ClientAuthNone).ServerConfig(), Listener: l, FrameTimeout: 5 * time.Second}, slowHandler{})
	cfg := clientConfig(t, f.ca.CertFile, tlstest.Pair{})
	good := dialTLS(t, addr, cfg)
	goodR := bufio.NewReader(good)
	roundTrip(t, good, goodR, 1)

	// 1 MiB first frame: over the pre-authentication cap of 64 KiB.
	big := dialTLS(t, addr, cfg)
	hdr := binary.BigEndian.AppendUint32(nil, 1<<20)
	_, _ = big.Write(append(hdr, make([]byte, 64<<10)...))
	if _, err := big.Read(make([]byte, 1)); err == nil {
		t.Fatal("a 1 MiB first frame was answered")
	}
	roundTrip(t, good, goodR, 2)

	// Plaintext Kafka bytes to the TLS port.
	raw, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = raw.Write(apiVersionsFrame(7))
	buf := make([]byte, 64)
	for {
		// The server may answer with a TLS alert before closing; it
		// never answers with a Kafka frame.
		n, err := raw.Read(buf)
		if err != nil {
			break
		}
		if n >= 8 && binary.BigEndian.Uint32(buf[4:8]) == 7 {
			t.Fatal("plaintext request answered on the TLS port")
		}
	}
	roundTrip(t, good, goodR, 3)
	waitFor(t, func() bool { return srv.OpenConnections() == 1 })
	st := srv.MemoryStats()
	for _, b := range st.Budgets {
		if b.Name == "request" && b.Used != 0 {
			t.Fatalf("request budget holds %d bytes after the refusals", b.Used)
		}
	}
}

// TestTLSReload: after Reload, new handshakes get the new certificate
// (from another CA), an old connection keeps working, and a bad file
// keeps the certificate in use.
func TestTLSReload(t *testing.T) {
	f := newTLSFixture(t)
	store := f.store(t, certs.ClientAuthNone)
	addr, _ := startServerWith(t, Config{TLS: store.ServerConfig()}, slowHandler{})
	old := dialTLS(t, addr, clientConfig(t, f.ca.CertFile, tlstest.Pair{}))
	oldR := bufio.NewReader(old)
	roundTrip(t, old, oldR, 1)

	ca2, err := tlstest.NewCA(t.TempDir(), "ca2")
	if err != nil {
		t.Fatal(err)
	}
	srv2, err := ca2.Server("server2")
	if err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{srv2.CertFile: f.server.CertFile, srv2.KeyFile: f.server.KeyFile} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Reload(); err != nil {
		t.Fatal(err)
	}
	c := dialTLS(t, addr, clientConfig(t, ca2.CertFile, tlstest.Pair{}))
	roundTrip(t, c, bufio.NewReader(c), 2)
	if c, err := tls.Dial("tcp", addr, clientConfig(t, f.ca.CertFile, tlstest.Pair{})); err == nil {
		c.Close()
		t.Fatal("a client trusting only the old CA accepted the reloaded certificate")
	}
	roundTrip(t, old, oldR, 3)

	if err := os.WriteFile(f.server.CertFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := store.Reload(); err == nil {
		t.Fatal("reload of a broken certificate file succeeded")
	}
	c = dialTLS(t, addr, clientConfig(t, ca2.CertFile, tlstest.Pair{}))
	roundTrip(t, c, bufio.NewReader(c), 4)
	roundTrip(t, old, oldR, 5)
}

// principalHandler answers ApiVersions and records each request's
// principal.
type principalHandler struct{ seen chan string }

func (principalHandler) Decode(h protocol.Header, body []byte) (*protocol.Request, error) {
	return slowHandler{}.Decode(h, body)
}

func (p principalHandler) Serve(r *protocol.Request) {
	p.seen <- r.Conn.PrincipalName()
	r.Respond(&kmsg.ApiVersionsResponse{})
}

func TestTLSClientCertPrincipal(t *testing.T) {
	f := newTLSFixture(t)
	h := principalHandler{seen: make(chan string, 4)}
	addr, _ := startServerWith(t, Config{TLS: f.store(t, certs.ClientAuthRequired).ServerConfig()}, h)
	c := dialTLS(t, addr, clientConfig(t, f.ca.CertFile, f.client))
	roundTrip(t, c, bufio.NewReader(c), 1)
	if got := <-h.seen; got != "User:alice" {
		t.Fatalf("principal %q, want User:alice", got)
	}

	// Required: a client without a certificate gets no service. With
	// TLS 1.3 the refusal arrives after the client's handshake returns.
	nc, err := tls.Dial("tcp", addr, clientConfig(t, f.ca.CertFile, tlstest.Pair{}))
	if err == nil {
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = nc.Write(apiVersionsFrame(2))
		if _, err := nc.Read(make([]byte, 1)); err == nil {
			t.Fatal("a client without a certificate was served")
		}
	}

	// Requested: without a certificate the client is User:ANONYMOUS.
	addr2, _ := startServerWith(t, Config{TLS: f.store(t, certs.ClientAuthRequested).ServerConfig()}, h)
	c2 := dialTLS(t, addr2, clientConfig(t, f.ca.CertFile, tlstest.Pair{}))
	roundTrip(t, c2, bufio.NewReader(c2), 3)
	if got := <-h.seen; got != protocol.AnonymousPrincipal {
		t.Fatalf("principal %q, want %s", got, protocol.AnonymousPrincipal)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}
}
