// Package certs loads the PEM files of TLS listeners and cluster links
// and serves them to handshakes, reloadable (SIGHUP) without dropping
// connections. Standard library only, so any package may use it.
package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// ClientAuth is Kafka's ssl.client.auth: whether a TLS listener asks
// clients for a certificate.
type ClientAuth string

const (
	ClientAuthNone      ClientAuth = "none"      // no certificate asked for
	ClientAuthRequested ClientAuth = "requested" // asked for, verified if given
	ClientAuthRequired  ClientAuth = "required"  // a verified certificate is needed
)

// ParseClientAuth reads none|requested|required ("" is none).
func ParseClientAuth(v string) (ClientAuth, error) {
	switch ClientAuth(v) {
	case "", ClientAuthNone:
		return ClientAuthNone, nil
	case ClientAuthRequested, ClientAuthRequired:
		return ClientAuth(v), nil
	}
	return "", fmt.Errorf("tls client auth %q: want none, requested or required", v)
}

// Files names PEM files: a certificate chain and its key, and the CAs
// that client (or, for cluster links, peer) certificates must chain to.
type Files struct {
	Cert, Key string
	CA        string // PEM bundle; needed unless ClientAuth is none
	// ClientAuth applies to ServerConfig; ClientConfig always uses CA as
	// its roots and presents Cert.
	ClientAuth ClientAuth
}

// Store serves the certificates of Files to every handshake and
// reloads them on demand (SIGHUP): connections open keep going, new
// handshakes get the new files. Safe for concurrent use.
type Store struct {
	files Files
	cur   atomic.Pointer[loadedCerts]
}

type loadedCerts struct {
	cert *tls.Certificate
	pool *x509.CertPool // nil: no CA file
}

// New loads the files; they must be valid now.
func New(files Files) (*Store, error) {
	if files.Cert == "" || files.Key == "" {
		return nil, errors.New("tls: a certificate and a key file are both needed")
	}
	if files.ClientAuth != ClientAuthNone && files.ClientAuth != "" && files.CA == "" {
		return nil, fmt.Errorf("tls: client auth %s needs a CA file to verify client certificates", files.ClientAuth)
	}
	cs := &Store{files: files}
	if err := cs.Reload(); err != nil {
		return nil, err
	}
	return cs, nil
}

// Reload reads the files again. On an error the certificates in use are
// kept and the error says what is wrong with the new ones.
func (c *Store) Reload() error {
	cert, err := tls.LoadX509KeyPair(c.files.Cert, c.files.Key)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", c.files.Cert, c.files.Key, err)
	}
	l := &loadedCerts{cert: &cert}
	if c.files.CA != "" {
		pem, err := os.ReadFile(c.files.CA)
		if err != nil {
			return fmt.Errorf("tls: read CA bundle: %w", err)
		}
		l.pool = x509.NewCertPool()
		if !l.pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("tls: no certificate in CA bundle %s", c.files.CA)
		}
	}
	c.cur.Store(l)
	return nil
}

// ServerConfig is a listener's config: TLS 1.2 at least, the current
// certificate and client CAs read at each handshake.
func (c *Store) ServerConfig() *tls.Config {
	auth := tls.NoClientCert
	switch c.files.ClientAuth {
	case ClientAuthRequested:
		auth = tls.VerifyClientCertIfGiven
	case ClientAuthRequired:
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			l := c.cur.Load()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*l.cert},
				ClientAuth:   auth,
				ClientCAs:    l.pool,
			}, nil
		},
	}
}

// ClientConfig is a dialer's config for links between nodes and for the
// admin commands: it presents the current certificate and verifies the
// server's against the current CA and the dialed name (both reloadable,
// hence the verification in VerifyConnection rather than RootCAs).
func (c *Store) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Not skipped: VerifyConnection below does the same chain and
		// name checks against the CA loaded now.
		InsecureSkipVerify: true,
		VerifyConnection: func(st tls.ConnectionState) error {
			if len(st.PeerCertificates) == 0 {
				return errors.New("tls: the server presented no certificate")
			}
			opts := x509.VerifyOptions{Roots: c.cur.Load().pool, DNSName: st.ServerName, Intermediates: x509.NewCertPool()}
			for _, ic := range st.PeerCertificates[1:] {
				opts.Intermediates.AddCert(ic)
			}
			if _, err := st.PeerCertificates[0].Verify(opts); err != nil {
				return fmt.Errorf("tls: server certificate: %w", err)
			}
			return nil
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return c.cur.Load().cert, nil
		},
	}
}
