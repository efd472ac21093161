package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A node's raft groups share its one raft port. Group 0 (the metadata
// group) speaks exactly what nodes without groups do, so a node with a
// RaftPort and one without talk in group 0: its raft connections start
// with raft's own RPC type byte, its snapshot fetches with fetchByte. A
// connection for group g > 0 starts with a two-byte preamble, the marker
// then g, written by the dialer once the link is up (after the TLS or
// link-secret handshake, which therefore covers every group).
const (
	groupRaftByte  byte = 0xF8 // then g, then raft's bytes
	groupFetchByte byte = 0xF9 // then g, then fetch requests (snapfetch.go)
)

// RaftPortOptions configures a node's shared raft port: the inputs
// NewRaft uses for its own listener when it has no RaftPort.
type RaftPortOptions struct {
	// Bind is the host:port to listen on.
	Bind string
	// Advertise is the host:port peers dial, and each group's Self.Raft.
	// Empty: the listener's address (right for a specific host, as
	// 127.0.0.1:0 in tests, not for a wildcard bind).
	Advertise string
	// TLS and DialTLS, both set, put the port on mutual TLS (see
	// RaftOptions.TLS).
	TLS, DialTLS *tls.Config
	// LinkSecrets, without TLS, authenticate every connection (see
	// RaftOptions.LinkSecrets).
	LinkSecrets [][]byte
	Logger      *slog.Logger
}

// RaftPort is a node's raft port shared by its raft groups: it owns the
// listener and its accept loop, and routes each accepted connection, by
// its preamble, to one group's raft transport or snapshot-file server.
// Open one per node, give it to each group's NewRaft (RaftOptions.Port),
// and Close it after their Shutdown.
type RaftPort struct {
	inner raft.StreamLayer // TLS, link-secret or plain TCP; immutable
	log   *slog.Logger
	// done is closed by Close; the accept loop and classify goroutines
	// stop on it.
	done      chan struct{}
	closeOnce sync.Once

	// groups are the open groups' layers, added by open and removed by
	// their Close (any goroutine), read by classify goroutines.
	mu     sync.Mutex
	groups map[uint8]*muxStream
	closed bool // set by Close under mu: open then fails
}

// OpenRaftPort listens on o.Bind and starts routing connections; groups
// join with NewRaft (RaftOptions.Port) or Group.
func OpenRaftPort(o RaftPortOptions) (*RaftPort, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	log := o.Logger.With("component", "raft-port")
	var adv net.Addr
	if o.Advertise != "" {
		a, err := net.ResolveTCPAddr("tcp", o.Advertise)
		if err != nil {
			return nil, fmt.Errorf("raft port: advertised address %q: %w", o.Advertise, err)
		}
		adv = a
	}
	inner, err := newPortStream(o.Bind, adv, o.TLS, o.DialTLS, o.LinkSecrets, log)
	if err != nil {
		return nil, fmt.Errorf("open raft port: %w", err)
	}
	return newRaftPort(inner, log), nil
}

// newPortStream is the stream layer under a raft port: mutual TLS when
// server is set, else plain TCP, authenticated by secrets when there are
// any.
func newPortStream(bind string, adv net.Addr, server, client *tls.Config, secrets [][]byte, log *slog.Logger) (raft.StreamLayer, error) {
	if server != nil {
		return newTLSStream(bind, adv, server, client)
	}
	tcp, err := newTCPStream(bind, adv)
	if err != nil {
		return nil, err
	}
	if len(secrets) > 0 {
		return newSecretStream(tcp, secrets, log), nil
	}
	return tcp, nil
}

func newRaftPort(inner raft.StreamLayer, log *slog.Logger) *RaftPort {
	p := &RaftPort{inner: inner, log: log, done: make(chan struct{}), groups: map[uint8]*muxStream{}}
	go p.acceptLoop()
	return p
}

// Addr is the port's advertised address, for every group's Self.Raft and
// Peers entries.
func (p *RaftPort) Addr() string { return p.inner.Addr().String() }

// Group opens group g's raft stream layer, for a raft.NetworkTransport
// built by the caller: snapshot fetches for g are refused (NewRaft with
// RaftOptions.Port opens its group with a fetch server instead). One
// layer per group at a time; its Close frees g.
func (p *RaftPort) Group(g uint8) (raft.StreamLayer, error) { return p.open(g, nil, false) }

// open registers group g's layer; serveFetch, when set, serves g's
// snapshot fetches. owns makes the layer's Close close the port too.
func (p *RaftPort) open(g uint8, serveFetch func(net.Conn), owns bool) (*muxStream, error) {
	s := p.layer(g, serveFetch, owns)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("raft group %d: %w", g, net.ErrClosed)
	}
	if _, ok := p.groups[g]; ok {
		return nil, fmt.Errorf("raft group %d is already open on this port", g)
	}
	p.groups[g] = s
	return s, nil
}

// layer is a new, unregistered layer for group g.
func (p *RaftPort) layer(g uint8, serveFetch func(net.Conn), owns bool) *muxStream {
	return &muxStream{port: p, group: g, log: p.log.With("raft_group", g), serveFetch: serveFetch, ownsPort: owns,
		raftCh: make(chan net.Conn), done: make(chan struct{})}
}

// unregister frees g after its layer s closed (a later layer of the same
// group is left alone).
func (p *RaftPort) unregister(s *muxStream) {
	p.mu.Lock()
	if p.groups[s.group] == s {
		delete(p.groups, s.group)
	}
	p.mu.Unlock()
}

func (p *RaftPort) lookup(g uint8) *muxStream {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.groups[g]
}

// Close stops the listener and every group's layer: their Accept fails
// and the fetches they serve are closed (raft's connections are raft's
// to close).
func (p *RaftPort) Close() error {
	var err error
	p.closeOnce.Do(func() {
		close(p.done)
		err = p.inner.Close()
		p.mu.Lock()
		p.closed = true
		groups := make([]*muxStream, 0, len(p.groups))
		for _, s := range p.groups {
			groups = append(groups, s)
		}
		clear(p.groups)
		p.mu.Unlock()
		for _, s := range groups {
			s.shut()
		}
	})
	return err
}

// acceptLoop owns the inner listener's Accept until Close.
func (p *RaftPort) acceptLoop() {
	backoff := time.Duration(0)
	for {
		c, err := p.inner.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			// A transient accept error (out of descriptors): back off as
			// net/http does rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			p.log.Warn("raft accept failed", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-p.done:
				return
			}
			continue
		}
		backoff = 0
		go p.classify(c)
	}
}

// classify reads c's preamble and hands c to its group's raft transport
// or fetch server; on its own goroutine, which serves the fetch.
func (p *RaftPort) classify(c net.Conn) {
	// The preamble's read also runs the TLS or link-secret handshake
	// (secretStream.Accept): one deadline bounds both.
	_ = c.SetReadDeadline(time.Now().Add(firstByteWait))
	var b [2]byte
	if _, err := io.ReadFull(c, b[:1]); err != nil {
		if !errors.Is(err, io.EOF) {
			p.log.Debug("raft connection closed before its first byte", "remote", c.RemoteAddr().String(), "err", err)
		}
		_ = c.Close()
		return
	}
	group, fetch, replay := uint8(0), b[0] == fetchByte, b[0] != fetchByte
	if b[0] == groupRaftByte || b[0] == groupFetchByte {
		if _, err := io.ReadFull(c, b[1:]); err != nil {
			p.log.Debug("raft connection closed inside its preamble", "remote", c.RemoteAddr().String(), "err", err)
			_ = c.Close()
			return
		}
		group, fetch, replay = b[1], b[0] == groupFetchByte, false
	}
	_ = c.SetReadDeadline(time.Time{})
	s := p.lookup(group)
	if s == nil {
		// A peer may run a group this node has not opened yet (or has
		// shut down): its raft retries.
		p.log.Debug("connection for a raft group not open here", "raft_group", group, "fetch", fetch, "remote", c.RemoteAddr().String())
		_ = c.Close()
		return
	}
	if fetch {
		s.serve(c)
		return
	}
	if replay {
		c = &replayConn{Conn: c, first: b[0], pending: true}
	}
	s.deliver(c)
}

// transport is group g's raft transport on the port, as newRaftTransport
// builds one with a listener of its own: snaps serves g's snapshot files
// and pulls from peers' group g.
func (p *RaftPort) transport(g uint8, self, stateDir string, snaps *snapStore, hlog hclog.Logger) (*raft.NetworkTransport, error) {
	snaps.setFetch(self, stateDir, nil)
	s, err := p.open(g, snaps.server.serve, false)
	if err != nil {
		return nil, err
	}
	return newGroupTransport(s, snaps, hlog), nil
}
