package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// tlsStream is raft's stream layer over mutual TLS: the listener asks
// every peer for a certificate signed by the cluster CA and refuses a
// connection without one (its handshake fails on the first read, before
// raft decodes anything); dials present this node's certificate and
// verify the peer's against the same CA.
type tlsStream struct {
	net.Listener
	adv    net.Addr
	client *tls.Config
}

// newTLSStream listens on bind. server must require and verify client
// certificates; client must carry this node's certificate and the CA.
func newTLSStream(bind string, adv net.Addr, server, client *tls.Config) (*tlsStream, error) {
	if server == nil || client == nil {
		return nil, errors.New("raft tls: server and client configs are both needed")
	}
	if server.ClientAuth != tls.RequireAndVerifyClientCert && server.GetConfigForClient == nil {
		return nil, errors.New("raft tls: the listener must require client certificates")
	}
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft listen %s: %w", bind, err)
	}
	return &tlsStream{Listener: tls.NewListener(l, server), adv: adv, client: client}, nil
}

// Dial dials a peer and completes the handshake within timeout.
func (s *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	c, err := tls.DialWithDialer(d, "tcp", string(addr), s.client)
	if err != nil {
		return nil, fmt.Errorf("raft tls dial %s: %w", addr, err)
	}
	return c, nil
}

// Addr is the address peers are told (the advertised one).
func (s *tlsStream) Addr() net.Addr {
	if s.adv != nil {
		return s.adv
	}
	return s.Listener.Addr()
}
