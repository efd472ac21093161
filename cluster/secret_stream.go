package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// secretStream authenticates the raft port's plaintext connections with
// the cluster secret: a connection opens with a mutual challenge-response
// before raft or the snapshot-file server reads a byte of it, so a peer
// that does not hold the secret can neither send raft RPCs (and, with a
// higher term, take the cluster over) nor fetch snapshot files.
//
// The exchange, on a fresh connection:
//
//	dialer   -> linkMagic, its nonce cn (32 random bytes)
//	listener -> its nonce sn (32), HMAC-SHA256(secret, serverLabel|cn|sn)
//	dialer   -> HMAC-SHA256(secret, clientLabel|cn|sn), after checking the listener's
//
// Each side proves the secret over both nonces, so neither answer can be
// replayed on another connection, and the dialer reveals nothing until the
// listener has proved itself. MACs are compared in constant time.
//
// This authenticates peers when they connect; it does not encrypt the
// stream nor protect it afterwards (someone able to rewrite the traffic
// between two nodes could hijack an authenticated connection). Mutual TLS
// (tls_transport.go) does both; with TLS the secret is not used here.
type secretStream struct {
	raft.StreamLayer // the plaintext tcpStream
	// secrets: this node proves the first; a peer may prove any (two
	// while the cluster's secret is rotated).
	secrets [][]byte
	log     *slog.Logger
}

// linkMagic starts a secret-authenticated raft connection; its last byte
// is the exchange's version.
var linkMagic = []byte("RGNL\x01")

const (
	linkNonceLen = 32
	linkMACLen   = sha256.Size
	serverLabel  = "regent raft link: listener\x00"
	clientLabel  = "regent raft link: dialer\x00"
)

// errLinkAuth marks a connection refused for its authentication.
var errLinkAuth = errors.New("raft link not authenticated")

func newSecretStream(inner raft.StreamLayer, secrets [][]byte, log *slog.Logger) *secretStream {
	s := &secretStream{StreamLayer: inner, log: log}
	for _, k := range secrets {
		s.secrets = append(s.secrets, bytes.Clone(k))
	}
	return s
}

// Accept returns the next connection; its exchange runs on its first Read
// or Write, on the goroutine that reads it (RaftPort's classify, under
// its first-byte deadline), so a slow or silent peer holds no accept.
func (s *secretStream) Accept() (net.Conn, error) {
	c, err := s.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return &secretConn{Conn: c, handshake: s.serverHandshake}, nil
}

// Dial connects to addr and runs the dialer's side of the exchange within
// timeout.
func (s *secretStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := s.StreamLayer.Dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	if timeout > 0 {
		_ = c.SetDeadline(time.Now().Add(timeout))
	}
	if err := s.clientHandshake(c); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("raft link to %s: %w", addr, err)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// mac is this node's proof: its own secret over label and both nonces.
func (s *secretStream) mac(label string, cn, sn []byte) []byte {
	return linkMAC(s.secrets[0], label, cn, sn)
}

// proves reports whether got is a proof with one of the accepted
// secrets, comparing with each in constant time.
func (s *secretStream) proves(got []byte, label string, cn, sn []byte) bool {
	ok := false
	for _, k := range s.secrets {
		ok = hmac.Equal(got, linkMAC(k, label, cn, sn)) || ok
	}
	return ok
}

func linkMAC(key []byte, label string, cn, sn []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	m.Write(cn)
	m.Write(sn)
	return m.Sum(nil)
}

func (s *secretStream) clientHandshake(c net.Conn) error {
	hello := make([]byte, len(linkMagic)+linkNonceLen)
	copy(hello, linkMagic)
	cn := hello[len(linkMagic):]
	if _, err := rand.Read(cn); err != nil {
		return fmt.Errorf("link nonce: %w", err)
	}
	if _, err := c.Write(hello); err != nil {
		return fmt.Errorf("send link hello: %w", err)
	}
	var answer [linkNonceLen + linkMACLen]byte
	if _, err := io.ReadFull(c, answer[:]); err != nil {
		return fmt.Errorf("%w: no answer to the link hello (does the peer have this --cluster-secret-file, and no --cluster-tls-*?): %v", errLinkAuth, err)
	}
	sn, smac := answer[:linkNonceLen], answer[linkNonceLen:]
	if !s.proves(smac, serverLabel, cn, sn) {
		return fmt.Errorf("%w: the peer does not hold this node's cluster secret", errLinkAuth)
	}
	if _, err := c.Write(s.mac(clientLabel, cn, sn)); err != nil {
		return fmt.Errorf("send link proof: %w", err)
	}
	return nil
}

// serverHandshake runs the listener's side; a refusal is logged (the
// peer's address and why, never the secret).
func (s *secretStream) serverHandshake(c net.Conn) error {
	err := s.serve(c)
	if err != nil {
		s.log.Warn("raft link refused", "remote", c.RemoteAddr().String(), "err", err)
	}
	return err
}

func (s *secretStream) serve(c net.Conn) error {
	// The magic a byte at a time: a peer sending anything else (a raft
	// RPC's type byte, a fetch's) is refused at its first byte.
	var b [1]byte
	for _, want := range linkMagic {
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return fmt.Errorf("%w: read hello: %v", errLinkAuth, err)
		}
		if b[0] != want {
			return fmt.Errorf("%w: no link hello (a node without --cluster-secret-file, or not a node)", errLinkAuth)
		}
	}
	cn := make([]byte, linkNonceLen)
	if _, err := io.ReadFull(c, cn); err != nil {
		return fmt.Errorf("%w: read hello: %v", errLinkAuth, err)
	}
	sn := make([]byte, linkNonceLen)
	if _, err := rand.Read(sn); err != nil {
		return fmt.Errorf("link nonce: %w", err)
	}
	answer := append(bytes.Clone(sn), s.mac(serverLabel, cn, sn)...)
	if _, err := c.Write(answer); err != nil {
		return fmt.Errorf("%w: send answer: %v", errLinkAuth, err)
	}
	var proof [linkMACLen]byte
	if _, err := io.ReadFull(c, proof[:]); err != nil {
		return fmt.Errorf("%w: read proof (the peer refused this node's answer: a different cluster secret?): %v", errLinkAuth, err)
	}
	if !s.proves(proof[:], clientLabel, cn, sn) {
		return fmt.Errorf("%w: wrong proof (a different cluster secret)", errLinkAuth)
	}
	return nil
}

// secretConn is an accepted connection whose exchange runs before its
// first Read or Write returns; a failed exchange fails every later call.
// Callers may read and write from different goroutines: once makes them
// wait for the one exchange.
type secretConn struct {
	net.Conn
	handshake func(net.Conn) error
	once      sync.Once
	err       error
}

func (c *secretConn) authenticated() error {
	c.once.Do(func() { c.err = c.handshake(c.Conn) })
	return c.err
}

func (c *secretConn) Read(p []byte) (int, error) {
	if err := c.authenticated(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *secretConn) Write(p []byte) (int, error) {
	if err := c.authenticated(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

var _ raft.StreamLayer = (*secretStream)(nil)
