// Package netio is the network edge: a gnet event loop that frames Kafka
// requests, parses their headers, hands them to the protocol layer and writes
// responses back strictly in request order.
package netio

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/regent-broker/regent/protocol"
)

// Handler serves decoded requests. Serve is called on the event loop, in
// request order per connection; it must not block (no disk, no raft, no
// waiting on futures) and must complete the request exactly once, from any
// goroutine, with Respond or NoResponse.
type Handler interface {
	Serve(r *protocol.Request)
	// Decode builds the typed request for a header and body, or an error
	// when the key or version is not served or the body is malformed.
	Decode(h protocol.Header, body []byte) (*protocol.Request, error)
}

// Config holds the network limits. Zero values mean the defaults.
type Config struct {
	Addr string // host:port
	// MaxRequestBytes bounds one request frame (default 100 MiB).
	MaxRequestBytes int
	// MaxConnections bounds open connections (default 10000).
	MaxConnections int
	// IdleTimeout closes connections with nothing in flight and no traffic
	// for this long (default 10 minutes, Kafka's connections.max.idle.ms).
	IdleTimeout time.Duration
	// MaxInFlight bounds requests read but not yet answered on one
	// connection; past it the connection's input waits (default 128).
	MaxInFlight int
	// MaxPendingBytes bounds response bytes queued for one connection; past
	// it the connection's input waits (default 128 MiB).
	MaxPendingBytes int64
	Multicore       bool
	Logger          *slog.Logger
	// Observer is told of every request (telemetry); nil: none, at no cost.
	Observer protocol.Observer
}

func (c *Config) setDefaults() {
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = 100 << 20
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = 10000
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 10 * time.Minute
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 128
	}
	if c.MaxPendingBytes <= 0 {
		c.MaxPendingBytes = 128 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Server is the gnet server.
type Server struct {
	gnet.BuiltinEventEngine
	cfg     Config
	handler Handler
	log     *slog.Logger
	obs     protocol.Observer // nil: requests are not observed

	engine  gnet.Engine
	booted  chan struct{}
	nextID  atomic.Uint64
	open    atomic.Int64
	conns   sync.Map // id -> *connState, for idle sweeps
	stopped atomic.Bool
}

// New makes a server; Run starts it.
func New(cfg Config, h Handler) *Server {
	cfg.setDefaults()
	return &Server{cfg: cfg, handler: h, log: cfg.Logger, obs: cfg.Observer, booted: make(chan struct{})}
}

// OpenConnections is the number of open client connections.
func (s *Server) OpenConnections() int64 { return s.open.Load() }

// Run serves until Stop; it returns once the engine has shut down.
func (s *Server) Run() error {
	err := gnet.Run(s, "tcp://"+s.cfg.Addr,
		gnet.WithMulticore(s.cfg.Multicore),
		gnet.WithReuseAddr(true),
		gnet.WithTicker(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithReadBufferCap(1<<20),
		gnet.WithWriteBufferCap(1<<20),
		gnet.WithLogger(gnetLogger{s.log}),
	)
	if err != nil && !s.stopped.Load() {
		return fmt.Errorf("serve %s: %w", s.cfg.Addr, err)
	}
	return nil
}

// Booted is closed once the listener is up.
func (s *Server) Booted() <-chan struct{} { return s.booted }

// Stop closes the listener and every connection.
func (s *Server) Stop(ctx context.Context) error {
	s.stopped.Store(true)
	select {
	case <-s.booted:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.engine.Stop(ctx)
}

// OnBoot records the engine.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.engine = eng
	close(s.booted)
	s.log.Info("listening", "addr", s.cfg.Addr)
	return gnet.None
}

// OnOpen admits a connection if under the limit.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if s.open.Add(1) > int64(s.cfg.MaxConnections) {
		s.open.Add(-1)
		s.log.Warn("connection refused: limit reached", "limit", s.cfg.MaxConnections, "remote", c.RemoteAddr().String())
		return nil, gnet.Close
	}
	cs := &connState{
		srv:  s,
		conn: c,
		info: &protocol.ConnInfo{ID: s.nextID.Add(1), RemoteAddr: c.RemoteAddr().String(), LocalAddr: c.LocalAddr().String()},
	}
	cs.lastActive.Store(time.Now().UnixNano())
	cs.out.pending = map[uint64]outFrame{}
	c.SetContext(cs)
	s.conns.Store(cs.info.ID, cs)
	return nil, gnet.None
}

// OnClose forgets the connection; answers still in flight are dropped.
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	if cs, ok := c.Context().(*connState); ok {
		s.open.Add(-1)
		s.conns.Delete(cs.info.ID)
		cs.closed.Store(true)
	}
	return gnet.None
}

// OnTick closes idle connections.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	now := time.Now().UnixNano()
	limit := s.cfg.IdleTimeout.Nanoseconds()
	s.conns.Range(func(_, v any) bool {
		cs := v.(*connState)
		if cs.inFlight.Load() == 0 && now-cs.lastActive.Load() > limit {
			s.log.Debug("closing idle connection", "remote", cs.info.RemoteAddr)
			_ = cs.conn.Close()
		}
		return true
	})
	tick := s.cfg.IdleTimeout / 4
	if tick > 10*time.Second {
		tick = 10 * time.Second
	}
	return tick, gnet.None
}

// OnTraffic frames whole requests out of the inbound buffer.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	cs, ok := c.Context().(*connState)
	if !ok {
		return gnet.Close
	}
	now := time.Now()
	cs.lastActive.Store(now.UnixNano())
	for {
		if cs.inFlight.Load() >= int64(s.cfg.MaxInFlight) || cs.pendingBytes.Load() >= s.cfg.MaxPendingBytes {
			// Wait for answers to drain; the write callback wakes us.
			// gnet keeps reading the socket meanwhile, so a client that
			// floods past one more maximal request is cut off.
			cs.paused.Store(true)
			if c.InboundBuffered() > s.cfg.MaxRequestBytes+(4<<20) {
				s.log.Warn("closing connection: input floods past in-flight limit", "remote", cs.info.RemoteAddr)
				return gnet.Close
			}
			return gnet.None
		}
		if c.InboundBuffered() < 4 {
			if s.obs != nil && c.InboundBuffered() > 0 && cs.frameStart.IsZero() {
				cs.frameStart = now
			}
			return gnet.None
		}
		lb, _ := c.Peek(4)
		size := int(int32(binary.BigEndian.Uint32(lb)))
		if size < 0 || size > s.cfg.MaxRequestBytes {
			s.log.Warn("closing connection: request size out of bounds", "size", size, "limit", s.cfg.MaxRequestBytes, "remote", cs.info.RemoteAddr)
			return gnet.Close
		}
		if c.InboundBuffered() < 4+size {
			if s.obs != nil && cs.frameStart.IsZero() {
				cs.frameStart = now
			}
			return gnet.None
		}
		_, _ = c.Discard(4)
		frame := make([]byte, size)
		if _, err := c.Read(frame); err != nil {
			return gnet.Close
		}
		var read, framed time.Time
		if s.obs != nil {
			read, framed = now, time.Now()
			if !cs.frameStart.IsZero() {
				read, cs.frameStart = cs.frameStart, time.Time{}
			}
		}
		if !cs.dispatch(frame, read, framed) {
			return gnet.Close
		}
	}
}

// connState is one connection's state.
type connState struct {
	srv  *Server
	conn gnet.Conn
	info *protocol.ConnInfo

	// nextSeq numbers requests; owned by the event loop.
	nextSeq uint64
	// frameStart is when the first bytes of a frame not yet whole arrived
	// (zero: none pending, or no observer); owned by the event loop.
	frameStart time.Time

	lastActive   atomic.Int64 // unix nanos of the last read
	inFlight     atomic.Int64 // requests read, response not yet written
	pendingBytes atomic.Int64 // response bytes handed to gnet, not yet written
	paused       atomic.Bool  // OnTraffic stopped reading for the limits
	closed       atomic.Bool

	out struct {
		sync.Mutex
		nextWrite uint64              // the next sequence number to write
		pending   map[uint64]outFrame // finished responses waiting for their turn
	}
}

// outFrame is a finished response: its frame (nil: none, acks=0) and the
// request's trace handle (nil: not observed).
type outFrame struct {
	frame []byte
	trace protocol.RequestTrace
}

// dispatch decodes a frame and hands it to the handler; false closes the
// connection. With an observer, read is when the frame's first bytes
// arrived and framed when it was whole.
func (cs *connState) dispatch(frame []byte, read, framed time.Time) bool {
	s := cs.srv
	h, body, err := protocol.ParseHeader(frame)
	if err != nil && !errors.Is(err, protocol.ErrUnknownKey) {
		s.log.Warn("closing connection: bad request header", "err", err, "remote", cs.info.RemoteAddr)
		return false
	}
	req, err := s.handler.Decode(h, body)
	if err != nil {
		s.log.Warn("closing connection: cannot serve request", "err", err, "key", h.Key, "version", h.Version, "client_id", h.ClientID, "remote", cs.info.RemoteAddr)
		return false
	}
	seq := cs.nextSeq
	cs.nextSeq++
	cs.inFlight.Add(1)
	req.Conn = cs.info
	var tr protocol.RequestTrace
	if s.obs != nil {
		decoded := time.Now()
		tr = s.obs.RequestStart(req, read, framed, decoded, len(frame)+4)
		req.SetTrace(tr)
	}
	req.SetReply(func(resp []byte) { cs.complete(seq, resp, tr) })
	s.handler.Serve(req)
	return true
}

// complete queues a finished response and writes every response that is
// now next in sequence. Called from any goroutine. tr (nil: not observed)
// is told when the response is written.
func (cs *connState) complete(seq uint64, frame []byte, tr protocol.RequestTrace) {
	cs.out.Lock()
	defer cs.out.Unlock()
	cs.out.pending[seq] = outFrame{frame: frame, trace: tr}
	var batch [][]byte
	var traces []protocol.RequestTrace // only when some response is observed
	var n int64
	for {
		f, ok := cs.out.pending[cs.out.nextWrite]
		if !ok {
			break
		}
		delete(cs.out.pending, cs.out.nextWrite)
		cs.out.nextWrite++
		if f.frame != nil {
			batch = append(batch, f.frame)
			n += int64(len(f.frame))
			if f.trace != nil {
				traces = append(traces, f.trace)
			}
		} else {
			cs.done(1, 0)
			if f.trace != nil {
				f.trace.Written(nil)
			}
		}
	}
	if len(batch) == 0 || cs.closed.Load() {
		if len(batch) > 0 {
			cs.done(int64(len(batch)), 0)
			written(traces, net.ErrClosed)
		}
		return
	}
	cs.pendingBytes.Add(n)
	count := int64(len(batch))
	// Writes are queued under out's lock, so gnet runs them in sequence.
	err := cs.conn.AsyncWritev(batch, func(_ gnet.Conn, err error) error {
		cs.done(count, n)
		written(traces, err)
		return nil
	})
	if err != nil {
		cs.done(count, n)
		written(traces, err)
	}
}

// written tells the trace handles that their responses are written (or
// dropped, with err).
func written(traces []protocol.RequestTrace, err error) {
	for _, tr := range traces {
		tr.Written(err)
	}
}

// done releases in-flight slots and pending bytes and resumes a paused
// reader.
func (cs *connState) done(requests, bytes int64) {
	cs.inFlight.Add(-requests)
	cs.pendingBytes.Add(-bytes)
	if cs.paused.Load() && cs.inFlight.Load() < int64(cs.srv.cfg.MaxInFlight) && cs.pendingBytes.Load() < cs.srv.cfg.MaxPendingBytes {
		if cs.paused.CompareAndSwap(true, false) && !cs.closed.Load() {
			_ = cs.conn.Wake(nil)
		}
	}
}
