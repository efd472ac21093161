package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/regent-broker/regent/netio/certs"
	"github.com/regent-broker/regent/protocol"
)

// TLS configuration. Client listeners (SSL, SASL_SSL) use --tls-cert and
// --tls-key, and --tls-client-ca with --tls-client-auth for client
// certificates (Kafka's ssl.client.auth). Cluster links (raft and the
// admin endpoint) use their own files, --cluster-tls-cert/-key/-ca, always
// with mutual authentication: the cluster CA is who may be a node, which
// is rarely who may be a client. Give the same files to both if one CA
// serves both. SIGHUP reloads every file; a broken file keeps the old.

// tlsListener reports whether a listener speaks TLS.
func tlsListener(sp protocol.SecurityProtocol) bool {
	return sp == protocol.SSL || sp == protocol.SASLSSL
}

// validateTLS checks the TLS flags against each other and the listeners.
func (c Config) validateTLS(ls []listenerSpec) error {
	auth, err := certs.ParseClientAuth(c.TLSClientAuth)
	if err != nil {
		return fmt.Errorf("--tls-client-auth: %w", err)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	for _, l := range ls {
		if tlsListener(l.Security) && c.TLSCert == "" {
			return fmt.Errorf("listener %s://%s: TLS needs --tls-cert and --tls-key", l.Name, l.Addr)
		}
	}
	if auth != certs.ClientAuthNone && c.TLSClientCA == "" {
		return fmt.Errorf("--tls-client-auth %s: --tls-client-ca is needed to verify client certificates", auth)
	}
	n := 0
	for _, f := range []string{c.ClusterTLSCert, c.ClusterTLSKey, c.ClusterTLSCA} {
		if f != "" {
			n++
		}
	}
	if n != 0 && n != 3 {
		return errors.New("--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca go together")
	}
	if n == 3 && !c.Clustered() {
		return errors.New("--cluster-tls-* are for cluster links: set --raft-listen too")
	}
	return nil
}

// listenerCerts loads the client listeners' certificates (nil: no TLS
// listener).
func (c Config) listenerCerts(ls []listenerSpec) (*certs.Store, error) {
	need := false
	for _, l := range ls {
		need = need || tlsListener(l.Security)
	}
	if !need {
		return nil, nil
	}
	auth, _ := certs.ParseClientAuth(c.TLSClientAuth)
	s, err := certs.New(certs.Files{Cert: c.TLSCert, Key: c.TLSKey, CA: c.TLSClientCA, ClientAuth: auth})
	if err != nil {
		return nil, fmt.Errorf("--tls-*: %w", err)
	}
	return s, nil
}

// clusterCerts loads the cluster links' certificates (nil: plaintext
// links).
func (c Config) clusterCerts() (*certs.Store, error) {
	if c.ClusterTLSCert == "" {
		return nil, nil
	}
	s, err := certs.New(certs.Files{Cert: c.ClusterTLSCert, Key: c.ClusterTLSKey, CA: c.ClusterTLSCA, ClientAuth: certs.ClientAuthRequired})
	if err != nil {
		return nil, fmt.Errorf("--cluster-tls-*: %w", err)
	}
	return s, nil
}

// reloadOnSIGHUP reloads the stores (nil ones skipped) at every SIGHUP
// until ctx ends. Connections open keep their session; new handshakes
// get the new files. A file that does not load is logged and the
// certificates in use are kept.
//
// Without a store it leaves SIGHUP alone (its default action ends the
// process, unless another reload, such as the JWKS's, takes it).
func reloadOnSIGHUP(ctx context.Context, logger *slog.Logger, stores ...*certs.Store) {
	if !slices.ContainsFunc(stores, func(s *certs.Store) bool { return s != nil }) {
		return
	}
	onSIGHUP(ctx, func() {
		for _, st := range stores {
			if st == nil {
				continue
			}
			if err := st.Reload(); err != nil {
				logger.Error("SIGHUP: certificates not reloaded, the ones in use are kept", "err", err)
				continue
			}
			logger.Info("SIGHUP: certificates reloaded")
		}
	})
}

// onSIGHUP runs reload at every SIGHUP until ctx ends, on one goroutine.
// Each caller gets its own notification (signal.Notify delivers to every
// channel registered for the signal).
func onSIGHUP(ctx context.Context, reload func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
			reload()
		}
	}()
}

// adminHTTP is the client and URL scheme for admin endpoints: https with
// the node's certificate when cluster links are over mTLS.
func adminHTTP(linkCerts *certs.Store, timeout time.Duration) (*http.Client, string) {
	if linkCerts == nil {
		return &http.Client{Timeout: timeout}, "http://"
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: linkCerts.ClientConfig()}}, "https://"
}

// clusterTLS is the server and client config of cluster links (nil, nil:
// plaintext).
func clusterTLS(linkCerts *certs.Store) (server, client *tls.Config) {
	if linkCerts == nil {
		return nil, nil
	}
	return linkCerts.ServerConfig(), linkCerts.ClientConfig()
}
