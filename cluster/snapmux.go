package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// fetchByte opens a snapshot-file fetch connection on the raft port.
// raft's NetworkTransport starts every connection with an RPC type byte,
// 0 to 4 in hashicorp/raft 1.7; a byte far from those marks a fetch.
const fetchByte byte = 0xF7

// firstByteWait bounds how long an accepted connection may take to send
// its first byte (raft sends its RPC at once after dialing) so a silent
// peer does not hold a goroutine forever.
const firstByteWait = 30 * time.Second

// muxStream is raft's stream layer with a side channel on the same port:
// each accepted connection is classified by its first byte, raft's go to
// raft (the byte replayed), fetch connections to the snapshot-file server
// (snapfetch.go). With TLS below it, both kinds are on mutual TLS: the
// handshake runs on the first read here, and fails there for a peer
// without a certificate of the cluster CA.
type muxStream struct {
	inner raft.StreamLayer
	log   *slog.Logger
	// serveFetch handles one fetch connection on its own goroutine (after
	// the first byte); nil refuses them. Set before the first Accept.
	serveFetch func(net.Conn)

	raftCh    chan net.Conn
	done      chan struct{}
	closeOnce sync.Once

	// fetches holds the fetch connections being served, closed by Close
	// (raft's own connections are raft's to close).
	fetches struct {
		sync.Mutex
		m      map[net.Conn]struct{}
		closed bool
	}
}

func newMuxStream(inner raft.StreamLayer, log *slog.Logger, serveFetch func(net.Conn)) *muxStream {
	s := &muxStream{inner: inner, log: log, serveFetch: serveFetch, raftCh: make(chan net.Conn), done: make(chan struct{})}
	go s.acceptLoop()
	return s
}

// acceptLoop owns the inner listener's Accept until Close.
func (s *muxStream) acceptLoop() {
	backoff := time.Duration(0)
	for {
		c, err := s.inner.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			// A transient accept error (out of descriptors): back off as
			// net/http does rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("raft accept failed", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.done:
				return
			}
			continue
		}
		backoff = 0
		go s.classify(c)
	}
}

// classify reads c's first byte and hands c to raft or the fetch server.
func (s *muxStream) classify(c net.Conn) {
	var b [1]byte
	_ = c.SetReadDeadline(time.Now().Add(firstByteWait))
	if _, err := io.ReadFull(c, b[:]); err != nil {
		if !errors.Is(err, io.EOF) {
			s.log.Debug("raft connection closed before its first byte", "remote", c.RemoteAddr().String(), "err", err)
		}
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if b[0] == fetchByte {
		if s.serveFetch == nil || !s.track(c) {
			_ = c.Close()
			return
		}
		defer s.untrack(c)
		s.serveFetch(c)
		return
	}
	select {
	case s.raftCh <- &replayConn{Conn: c, first: b[0], pending: true}:
	case <-s.done:
		_ = c.Close()
	}
}

func (s *muxStream) track(c net.Conn) bool {
	s.fetches.Lock()
	defer s.fetches.Unlock()
	if s.fetches.closed {
		return false
	}
	if s.fetches.m == nil {
		s.fetches.m = map[net.Conn]struct{}{}
	}
	s.fetches.m[c] = struct{}{}
	return true
}

func (s *muxStream) untrack(c net.Conn) {
	s.fetches.Lock()
	delete(s.fetches.m, c)
	s.fetches.Unlock()
}

// Accept implements net.Listener for raft: its connections only.
func (s *muxStream) Accept() (net.Conn, error) {
	select {
	case c := <-s.raftCh:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (s *muxStream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		err = s.inner.Close()
		s.fetches.Lock()
		s.fetches.closed = true
		for c := range s.fetches.m {
			_ = c.Close()
		}
		s.fetches.Unlock()
	})
	return err
}

// Addr implements net.Listener: the advertised address.
func (s *muxStream) Addr() net.Addr { return s.inner.Addr() }

// Dial implements raft.StreamLayer.
func (s *muxStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.inner.Dial(addr, timeout)
}

// dialFetch opens a fetch connection to addr: a raft dial (TLS when the
// transport is) followed by the fetch byte.
func (s *muxStream) dialFetch(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := s.inner.Dial(raft.ServerAddress(addr), timeout)
	if err != nil {
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{fetchByte}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("open snapshot fetch to %s: %w", addr, err)
	}
	_ = c.SetWriteDeadline(time.Time{})
	return c, nil
}

// replayConn gives back the byte classify read before the rest. Read
// only by raft's connection goroutine.
type replayConn struct {
	net.Conn
	first   byte
	pending bool
}

func (c *replayConn) Read(p []byte) (int, error) {
	if c.pending && len(p) > 0 {
		p[0] = c.first
		c.pending = false
		return 1, nil
	}
	return c.Conn.Read(p)
}

// tcpStream is the plaintext stream layer under muxStream.
type tcpStream struct {
	net.Listener
	adv net.Addr
}

func newTCPStream(bind string, adv net.Addr) (*tcpStream, error) {
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft listen %s: %w", bind, err)
	}
	return &tcpStream{Listener: l, adv: adv}, nil
}

func (s *tcpStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	c, err := d.Dial("tcp", string(addr))
	if err != nil {
		return nil, fmt.Errorf("raft dial %s: %w", addr, err)
	}
	return c, nil
}

func (s *tcpStream) Addr() net.Addr {
	if s.adv != nil {
		return s.adv
	}
	return s.Listener.Addr()
}

var _ raft.StreamLayer = (*muxStream)(nil)
