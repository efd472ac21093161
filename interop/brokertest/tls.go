package brokertest

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"

	"github.com/regent-broker/regent/netio/tlstest"
)

// TLS is a test CA with a broker certificate (valid for 127.0.0.1 and
// localhost, usable as a node's cluster certificate too), in a temp dir.
type TLS struct {
	CA     *tlstest.CA
	Server tlstest.Pair
}

// NewTLS makes a CA named name and a broker certificate it signed.
func NewTLS(t testing.TB, name string) *TLS {
	t.Helper()
	ca, err := tlstest.NewCA(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Server(name + "-broker")
	if err != nil {
		t.Fatal(err)
	}
	return &TLS{CA: ca, Server: srv}
}

// Client issues a client certificate with subject CN cn.
func (x *TLS) Client(t testing.TB, cn string) tlstest.Pair {
	t.Helper()
	p, err := x.CA.Client("client-"+cn, cn)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// BrokerArgs are the listener flags: the broker certificate, and this CA
// for client certificates.
func (x *TLS) BrokerArgs() []string {
	return []string{"--tls-cert", x.Server.CertFile, "--tls-key", x.Server.KeyFile, "--tls-client-ca", x.CA.CertFile}
}

// ClusterArgs are the cluster-link flags (raft and admin over mutual TLS).
func (x *TLS) ClusterArgs() []string {
	return []string{"--cluster-tls-cert", x.Server.CertFile, "--cluster-tls-key", x.Server.KeyFile, "--cluster-tls-ca", x.CA.CertFile}
}

// ClientConfig trusts this CA and presents cert (zero Pair: none).
func (x *TLS) ClientConfig(t testing.TB, cert tlstest.Pair) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(x.CA.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
	cfg.RootCAs.AppendCertsFromPEM(pem)
	if cert.CertFile != "" {
		c, err := tls.LoadX509KeyPair(cert.CertFile, cert.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

// cliTLSArgs are the `regent cluster` flags that match the nodes'
// --cluster-tls-* among extra (none: plaintext admin endpoints).
func cliTLSArgs(extra []string) []string {
	m := map[string]string{"--cluster-tls-cert": "--tls-cert", "--cluster-tls-key": "--tls-key", "--cluster-tls-ca": "--tls-ca"}
	var out []string
	for i := 0; i+1 < len(extra); i++ {
		if f, ok := m[extra[i]]; ok {
			out = append(out, f, extra[i+1])
		}
	}
	return out
}
