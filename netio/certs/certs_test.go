package certs

import (
	"crypto/tls"
	"net"
	"os"
	"testing"
	"time"

	"github.com/regent-broker/regent/netio/tlstest"
)

// handshake runs a TLS handshake between server and client configs over
// loopback and returns the client's error (nil: both sides succeeded).
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srvErr := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Server(c, server)
		err = tc.Handshake()
		if err == nil {
			_, err = tc.Write([]byte{1}) // the client reads it: TLS 1.3 client auth settled
		}
		srvErr <- err
	}()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", l.Addr().String(), client)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	if serr := <-srvErr; err == nil {
		err = serr
	}
	return err
}

func TestMutualTLSAndClientReload(t *testing.T) {
	dir := t.TempDir()
	ca1, err := tlstest.NewCA(dir, "ca1")
	if err != nil {
		t.Fatal(err)
	}
	ca2, err := tlstest.NewCA(t.TempDir(), "ca2")
	if err != nil {
		t.Fatal(err)
	}
	n1, _ := ca1.Server("node1")
	n2, _ := ca1.Server("node2")
	server, err := New(Files{Cert: n1.CertFile, Key: n1.KeyFile, CA: ca1.CertFile, ClientAuth: ClientAuthRequired})
	if err != nil {
		t.Fatal(err)
	}
	// node2 trusts ca2 at first: it refuses node1's certificate.
	caFile := dir + "/node2-ca.pem"
	copyFile(t, ca2.CertFile, caFile)
	client, err := New(Files{Cert: n2.CertFile, Key: n2.KeyFile, CA: caFile})
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, server.ServerConfig(), client.ClientConfig()); err == nil {
		t.Fatal("a client trusting another CA accepted the server")
	}
	// The CA file is fixed and reloaded: the same config now connects.
	cfg := client.ClientConfig()
	copyFile(t, ca1.CertFile, caFile)
	if err := client.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, server.ServerConfig(), cfg); err != nil {
		t.Fatalf("after reloading the CA: %v", err)
	}
	// A client without a certificate is refused by a required server.
	if err := handshake(t, server.ServerConfig(), &tls.Config{RootCAs: cfg.RootCAs, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("a client without a certificate passed client auth required")
	}
	// The wrong name is refused: the server certificate is for 127.0.0.1.
	named := client.ClientConfig()
	named.ServerName = "other.example"
	if err := handshake(t, server.ServerConfig(), named); err == nil {
		t.Fatal("a certificate for 127.0.0.1 was accepted as other.example")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
