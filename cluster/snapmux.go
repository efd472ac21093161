package cluster

import (
	"fmt"
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

// muxStream is one raft group's stream layer on a RaftPort: the port's
// classify goroutines hand it the group's raft connections (Accept) and
// its snapshot fetches (served by serveFetch, snapfetch.go). Group 0
// dials without a preamble and fetches with fetchByte, as every node did
// before groups; group g > 0 opens its connections with the marker and g.
// With TLS below the port, both kinds are on mutual TLS: the handshake
// runs on the port's first read, and fails there for a peer without a
// certificate of the cluster CA.
type muxStream struct {
	port  *RaftPort
	group uint8
	log   *slog.Logger
	// serveFetch handles one fetch connection on its classify goroutine
	// (after the preamble); nil refuses them. Immutable.
	serveFetch func(net.Conn)
	// ownsPort: the port is this layer's alone (newMuxStream, NewRaft
	// without RaftOptions.Port), and Close closes it too.
	ownsPort bool

	raftCh    chan net.Conn
	done      chan struct{} // closed by shut
	closeOnce sync.Once

	// fetches holds the fetch connections being served, closed by shut
	// (raft's own connections are raft's to close).
	fetches struct {
		sync.Mutex
		m      map[net.Conn]struct{}
		closed bool
	}
}

// newMuxStream is a port over inner with one group, 0, whose layer owns
// the port: the raft port of a node without a shared RaftPort.
func newMuxStream(inner raft.StreamLayer, log *slog.Logger, serveFetch func(net.Conn)) *muxStream {
	p := newRaftPort(inner, log)
	s := p.layer(0, serveFetch, true)
	p.mu.Lock()
	p.groups[0] = s
	p.mu.Unlock()
	return s
}

// deliver hands raft connection c to Accept, on c's classify goroutine.
func (s *muxStream) deliver(c net.Conn) {
	select {
	case s.raftCh <- c:
	case <-s.done:
		_ = c.Close()
	}
}

// serve answers fetch connection c, on its classify goroutine.
func (s *muxStream) serve(c net.Conn) {
	if s.serveFetch == nil || !s.track(c) {
		s.log.Debug("snapshot fetch refused: no fetch server for this raft group", "remote", c.RemoteAddr().String())
		_ = c.Close()
		return
	}
	defer s.untrack(c)
	s.serveFetch(c)
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

// Accept implements net.Listener for raft: its group's connections only.
func (s *muxStream) Accept() (net.Conn, error) {
	select {
	case c := <-s.raftCh:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: it stops this group (its Accept, its
// fetches) and frees its number on the port; the port, and its other
// groups, go on unless this layer owns it.
func (s *muxStream) Close() error {
	s.shut()
	s.port.unregister(s)
	if s.ownsPort {
		return s.port.Close()
	}
	return nil
}

// shut ends Accept and closes the fetches being served (once).
func (s *muxStream) shut() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.fetches.Lock()
		s.fetches.closed = true
		for c := range s.fetches.m {
			_ = c.Close()
		}
		s.fetches.Unlock()
	})
}

// Addr implements net.Listener: the port's advertised address.
func (s *muxStream) Addr() net.Addr { return s.port.inner.Addr() }

// Dial implements raft.StreamLayer: a link to addr's port (TLS or
// authenticated when the port is), then the group's preamble.
func (s *muxStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := s.port.inner.Dial(addr, timeout)
	if err != nil || s.group == 0 {
		return c, err
	}
	if err := writePreamble(c, timeout, groupRaftByte, s.group); err != nil {
		return nil, fmt.Errorf("open raft group %d connection to %s: %w", s.group, addr, err)
	}
	return c, nil
}

// dialFetch opens a fetch connection to addr's group: a raft dial (TLS
// when the transport is) followed by the fetch preamble.
func (s *muxStream) dialFetch(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := s.port.inner.Dial(raft.ServerAddress(addr), timeout)
	if err != nil {
		return nil, err
	}
	pre := []byte{fetchByte}
	if s.group != 0 {
		pre = []byte{groupFetchByte, s.group}
	}
	if err := writePreamble(c, timeout, pre...); err != nil {
		return nil, fmt.Errorf("open snapshot fetch to %s: %w", addr, err)
	}
	return c, nil
}

// writePreamble writes pre to c within timeout (none: zero); it closes c
// on error.
func writePreamble(c net.Conn, timeout time.Duration, pre ...byte) error {
	if timeout > 0 {
		_ = c.SetWriteDeadline(time.Now().Add(timeout))
	}
	if _, err := c.Write(pre); err != nil {
		_ = c.Close()
		return err
	}
	_ = c.SetWriteDeadline(time.Time{})
	return nil
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
