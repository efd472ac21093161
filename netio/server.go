// Package netio is the network edge: a gnet event loop that frames Kafka
// requests, parses their headers, hands them to the protocol layer and writes
// responses back strictly in request order.
//
// Memory is bounded whatever clients do (see Budgets for the split):
//   - Requests: a frame's buffer grows as its bytes arrive (doubling, or
//     to the whole frame once 64 KiB have come and the rest fits a
//     quarter of the budget left; see growFrame), charged to the request
//     budget, and stays charged until the request is answered. gnet cannot
//     stop reading a socket: a connection that keeps sending while told to
//     wait is handed off to goroutines that can (handoff.go). When the
//     budget is spent, the connection holding the most unanswered-and-unread
//     bytes (partial frames, input buffered while paused) is closed if it is
//     another one, which frees more than is asked; otherwise the asking
//     connection waits, unread, if it has requests in flight (their answers
//     give bytes back), and is closed if not. A frame must be whole within
//     FrameTimeout of its first byte (slowloris).
//   - Responses: a connection's response bytes are counted from the moment
//     the handler answers until the socket has taken them (gnet's outbound
//     buffer, read with OutboundBuffered on the event loop), against the
//     connection's MaxPendingBytes and the global response budget. Past
//     either the connection stops framing new requests (past the global
//     one, a connection that owes nothing may have one request in flight);
//     one whose unsent bytes make no progress for WriteTimeout is closed.
package netio

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
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

// ConnCloseHandler is implemented by handlers that keep state of a
// connection beyond its requests (share sessions end with the connection
// that opened them, as in Kafka): ConnClosed is called once per closed
// connection with its ConnInfo.ID, on the connection's loop; it must not
// block.
type ConnCloseHandler interface {
	ConnClosed(id uint64)
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
	// FrameTimeout bounds the time from a frame's first byte to its last
	// (default 30 s); slower connections are closed.
	FrameTimeout time.Duration
	// WriteTimeout closes a connection whose unsent response bytes make no
	// progress for this long: a client that does not read (default 30 s).
	WriteTimeout time.Duration
	// MaxInFlight bounds requests read but not yet answered on one
	// connection; past it the connection's input waits (default 128).
	MaxInFlight int
	// MaxPendingBytes bounds one connection's response bytes not yet sent;
	// past it the connection's input waits (default the smaller of 128 MiB
	// and a quarter of the response budget).
	MaxPendingBytes int64
	// MaxMemory is the memory the edge and fetches may hold, split into
	// Budgets (default DefaultMaxMemory); ignored when Budgets is set.
	MaxMemory int64
	// Budgets, when set, are used instead of ones made from MaxMemory
	// (share them with the protocol server's fetch budget).
	Budgets *Budgets
	// Multicore runs EventLoops event loops (default DefaultEventLoops);
	// without it the server has one.
	Multicore bool
	// EventLoops is how many event loops a Multicore server runs (0:
	// DefaultEventLoops()).
	EventLoops int
	Logger     *slog.Logger
	// Observer is told of every request (telemetry); nil: none, at no cost.
	Observer protocol.Observer
	// Listener is the listener this server is (nil: a PLAINTEXT one). On a
	// SASL listener each connection gets a protocol.ConnAuth: until it has
	// authenticated, frames are bounded by protocol.PreAuthMaxFrame and
	// only the SASL requests and ApiVersions are served (any other closes
	// the connection, as Kafka does); after SaslHandshake v0 its frames are
	// raw SASL tokens.
	Listener *protocol.Listener
	// TLS, when set, serves this listener with crypto/tls on the standard
	// library's listener instead of gnet (gnet has no TLS): same framing,
	// dispatch, ordering and limits (see tls.go).
	TLS *tls.Config
	// ConnectionThrottle records a new connection from an address against
	// its connection-rate quota and returns how long to hold it, unread,
	// before closing it (0: serve it). nil: no connection-rate quotas.
	// See rate.go.
	ConnectionThrottle func(addr netip.Addr, now time.Time) time.Duration
	// PerIP bounds connections per client address (share one among a
	// node's listeners); nil: no bound. See iplimit.go.
	PerIP *PerIPLimit
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
	if c.FrameTimeout <= 0 {
		c.FrameTimeout = 30 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 128
	}
	if c.Budgets == nil {
		c.Budgets = NewBudgets(c.MaxMemory)
	}
	if c.MaxPendingBytes <= 0 {
		c.MaxPendingBytes = 128 << 20
		if r := c.Budgets.Response.Capacity(); r > 0 {
			c.MaxPendingBytes = min(c.MaxPendingBytes, r/4)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// drainPoll is how often connections that wait for output to drain (or
// hold unsent bytes) are looked at: gnet says nothing when its outbound
// buffer empties, so the edge polls OutboundBuffered on the event loop.
const drainPoll = 10 * time.Millisecond

// Server is the gnet server.
type Server struct {
	gnet.BuiltinEventEngine
	cfg     Config
	handler Handler
	log     *slog.Logger
	obs     protocol.Observer // nil: requests are not observed
	budgets *Budgets
	closed  closeCounts
	files   fileStats // file ranges' bytes, sent or copied (sendfile.go)
	// evicting tracks connections closed for the request budget whose
	// close has not run yet.
	evicting evictions

	engine  gnet.Engine // the gnet engine (plaintext listeners)
	tls     tlsServer   // the crypto/tls front door (Config.TLS set)
	booted  chan struct{}
	stop    chan struct{} // closed by Stop or at shutdown: ends the drain poller
	stopper sync.Once     // closes stop
	nextID  atomic.Uint64
	open    atomic.Int64
	conns   sync.Map // id -> *connState, for sweeps and eviction
	stopped atomic.Bool
	// socketBytes counts request bytes read straight from sockets into
	// frames (fill), past gnet's read buffer.
	socketBytes atomic.Int64
	// handoffs counts connections handed off the event loop (handoff.go);
	// handoffWaits those of them that waited for gnet's outbound buffer.
	handoffs, handoffWaits atomic.Int64
	// maxConns is Config.MaxConnections, changed by SetMaxConnections.
	maxConns atomic.Int64
	// budgetWaits counts times a connection waited for the request budget
	// instead of being closed (waitForBudget).
	budgetWaits atomic.Int64

	// watch holds the connections the drain poller wakes: paused ones and
	// ones with bytes in gnet's outbound buffer. Added to and removed from
	// on the connection's event loop.
	watch struct {
		sync.Mutex
		set   map[*connState]struct{}
		nudge chan struct{} // poller: the set is no longer empty
	}
}

// New makes a server; Run starts it.
func New(cfg Config, h Handler) *Server {
	cfg.setDefaults()
	s := &Server{cfg: cfg, handler: h, log: cfg.Logger, obs: cfg.Observer, budgets: cfg.Budgets, booted: make(chan struct{}), stop: make(chan struct{})}
	s.maxConns.Store(int64(cfg.MaxConnections))
	s.watch.set = map[*connState]struct{}{}
	s.watch.nudge = make(chan struct{}, 1)
	s.tls.mu.raw = map[net.Conn]struct{}{}
	return s
}

// OpenConnections is the number of open client connections.
func (s *Server) OpenConnections() int64 { return s.open.Load() }

// Run serves until Stop; it returns once the engine has shut down.
func (s *Server) Run() error {
	if s.cfg.TLS != nil {
		return s.runTLS()
	}
	err := gnet.Run(s, "tcp://"+s.cfg.Addr,
		gnet.WithNumEventLoop(s.eventLoops()),
		gnet.WithReuseAddr(true),
		gnet.WithTicker(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithReadBufferCap(readBufferBytes),
		gnet.WithWriteBufferCap(1<<20),
		gnet.WithLogger(gnetLogger{s.log}),
	)
	if err != nil && !s.stopped.Load() {
		return fmt.Errorf("serve %s: %w", s.cfg.Addr, err)
	}
	return nil
}

// DefaultEventLoops is half the Ps the Go runtime schedules on (at least
// one). Why not one per P: an event loop waits in epoll_wait as a plain
// blocking syscall, and keeps its P while it waits; the goroutines its
// last callback woke (a fetch, a produce's partition actor) sit in that P's
// run queue until another P steals them or the runtime's monitor takes
// the P back, which it does only on its next tick: up to 10 ms on a quiet
// node. With a loop on every P, every P can be held so at once; with Ps
// that no loop holds, a woken goroutine wakes an idle one at once.
// Measured on 2 cores (EndToEndLatency, 10000 records): two loops 15-17 ms
// at p99.9, one loop 7-9 ms, with the same produce and 4x4 throughput.
func DefaultEventLoops() int { return max(1, runtime.GOMAXPROCS(0)/2) }

func (s *Server) eventLoops() int {
	switch {
	case !s.cfg.Multicore:
		return 1
	case s.cfg.EventLoops > 0:
		return s.cfg.EventLoops
	default:
		return DefaultEventLoops()
	}
}

// Booted is closed once the listener is up.
func (s *Server) Booted() <-chan struct{} { return s.booted }

// Stop closes the listener and every connection.
func (s *Server) Stop(ctx context.Context) error {
	s.stopped.Store(true)
	s.stopper.Do(func() { close(s.stop) })
	select {
	case <-s.booted:
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.cfg.TLS != nil {
		return s.stopTLS(ctx)
	}
	err := s.engine.Stop(ctx)
	// Connections handed off by the event loop (handoff.go).
	s.closeRaw()
	done := make(chan struct{})
	go func() {
		s.tls.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

// OnBoot records the engine and starts the drain poller.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.engine = eng
	close(s.booted)
	go s.pollDrains()
	s.log.Info("listening", "addr", s.cfg.Addr)
	return gnet.None
}

// OnShutdown ends the drain poller however the engine stopped.
func (s *Server) OnShutdown(gnet.Engine) {
	s.stopper.Do(func() { close(s.stop) })
	sent, copied := s.FileBytes()
	s.log.Info("stopped", "addr", s.cfg.Addr, "file_bytes_sendfile", sent, "file_bytes_copied", copied)
}

// OnOpen admits a connection if under the limit.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	addr, reason, ok := s.admit(c.RemoteAddr())
	if !ok {
		s.closed[reason].Add(1)
		s.refuseLog(reason, c.RemoteAddr().String())
		return nil, gnet.Close
	}
	cs := s.newConn(c, addr, c.RemoteAddr().String(), c.LocalAddr().String(), "")
	// A plaintext socket: responses' file ranges go out with sendfile.
	cs.info.SendsFiles = true
	c.SetContext(cs)
	if hold := s.connectionThrottle(c.RemoteAddr()); hold > 0 {
		s.holdForRate(cs, hold)
	}
	return nil, gnet.None
}

// newConn makes an admitted connection's state and registers it.
// principal is what the transport proved ("User:CN" of a verified client
// certificate; empty: none); a SASL login replaces it.
func (s *Server) newConn(c edgeConn, addr netip.Addr, remote, local, principal string) *connState {
	cs := &connState{
		srv:    s,
		addr:   addr,
		output: protocol.NewBudget("connection", s.cfg.MaxPendingBytes),
	}
	cs.edgeNow.Store(&edgeRef{c})
	cs.info = &protocol.ConnInfo{ID: s.nextID.Add(1), RemoteAddr: remote, LocalAddr: local, Output: cs.output, Listener: s.cfg.Listener, Principal: principal}
	if l := s.cfg.Listener; l != nil && l.Security.SASL() && l.SASL != nil {
		cs.info.Auth = protocol.NewConnAuth(l.SASL, func() { cs.close(closeAuth) })
	}
	cs.lastActive.Store(time.Now().UnixNano())
	cs.out.pending = map[uint64]outFrame{}
	s.conns.Store(cs.info.ID, cs)
	return cs
}

// OnClose forgets the connection and gives back what it held; answers
// still in flight are dropped as they come.
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	switch x := c.Context().(type) {
	case *connState:
		s.closeConn(x)
	case *handoff:
		s.handoffClosed(x, c)
	}
	return gnet.None
}

// closeConn forgets a closed connection and gives back what it held. On
// the connection's loop (gnet's, or the TLS connection's loop lock).
func (s *Server) closeConn(cs *connState) {
	s.release(cs.addr)
	s.conns.Delete(cs.info.ID)
	s.unwatch(cs)
	if h, ok := s.handler.(ConnCloseHandler); ok {
		h.ConnClosed(cs.info.ID)
	}
	cs.releaseOutput(cs.outSnap)
	cs.outSnap = 0
	cs.outSince.Store(0)
	cs.frameMu.Lock()
	s.budgets.Request.Release(int64(cap(cs.partial)) + cs.inCharged)
	s.evicting.closed(cs)
	cs.reqHeld.Store(0)
	cs.partial, cs.inCharged, cs.pooled = nil, 0, nil
	cs.frameMu.Unlock()
	cs.out.Lock()
	cs.closed.Store(true)
	var dropped, bytes int64
	for seq, f := range cs.out.pending {
		delete(cs.out.pending, seq)
		dropped++
		bytes += f.size()
		protocol.ReleaseParts(f.parts)
		if f.trace != nil {
			f.trace.Written(net.ErrClosed)
		}
	}
	cs.out.Unlock()
	cs.releaseOutput(bytes)
	cs.inFlight.Add(-dropped)
}

// OnTick closes idle connections, connections whose frame is late and
// connections that do not read their responses. It runs on gnet's ticker
// goroutine, not on an event loop: it reads atomics and closes only.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	now := time.Now().UnixNano()
	idle := s.cfg.IdleTimeout.Nanoseconds()
	s.conns.Range(func(_, v any) bool {
		cs := v.(*connState)
		switch {
		case cs.closing.Load():
		case cs.inFlight.Load() == 0 && now-cs.lastActive.Load() > idle:
			s.log.Debug("closing idle connection", "remote", cs.info.RemoteAddr)
			cs.close(closeIdle)
		case since(cs.frameBegan.Load(), now) > s.cfg.FrameTimeout:
			s.log.Warn("closing connection: request frame not whole in time", "timeout", s.cfg.FrameTimeout, "remote", cs.info.RemoteAddr)
			cs.close(closeFrameTimeout)
		case since(cs.outSince.Load(), now) > s.cfg.WriteTimeout:
			s.log.Warn("closing connection: responses not read", "timeout", s.cfg.WriteTimeout, "unsent", cs.output.Used(), "remote", cs.info.RemoteAddr)
			cs.close(closeWriteStall)
		}
		return true
	})
	tick := min(s.cfg.IdleTimeout, s.cfg.FrameTimeout, s.cfg.WriteTimeout) / 4
	return max(min(tick, 10*time.Second), drainPoll), gnet.None
}

// since is the time from start (unix nanos; 0: not started) to now.
func since(start, now int64) time.Duration {
	if start == 0 {
		return 0
	}
	return time.Duration(now - start)
}

// pollDrains wakes the watched connections every drainPoll, so that their
// event loop sees their outbound bytes leave and resumes them.
func (s *Server) pollDrains() {
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	var batch []*connState
	for {
		s.watch.Lock()
		batch = batch[:0]
		for cs := range s.watch.set {
			batch = append(batch, cs)
		}
		s.watch.Unlock()
		for _, cs := range batch {
			_ = cs.edge().Wake(nil)
		}
		if len(batch) == 0 {
			select {
			case <-s.stop:
				return
			case <-s.watch.nudge:
			}
			continue
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// watchConn puts cs in the poller's set. On cs's event loop.
func (s *Server) watchConn(cs *connState) {
	if cs.watched {
		return
	}
	cs.watched = true
	s.watch.Lock()
	s.watch.set[cs] = struct{}{}
	s.watch.Unlock()
	select {
	case s.watch.nudge <- struct{}{}:
	default:
	}
}

// unwatch takes cs out of the poller's set. On cs's event loop.
func (s *Server) unwatch(cs *connState) {
	if !cs.watched {
		return
	}
	cs.watched = false
	s.watch.Lock()
	delete(s.watch.set, cs)
	s.watch.Unlock()
}

// OnTraffic frames requests out of the inbound buffer, moving each frame's
// bytes into its own buffer as they arrive. Also called by Wake, to resume
// a paused connection and to account its sent bytes.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	switch x := c.Context().(type) {
	case *connState:
		return s.traffic(x)
	case *handoff:
		return s.handoffTraffic(x, c)
	}
	return gnet.Close
}

// traffic frames what cs's input holds and accounts its output. On cs's
// loop.
func (s *Server) traffic(cs *connState) gnet.Action {
	cs.frameMu.Lock()
	defer cs.frameMu.Unlock()
	c := cs.edge()
	if cs.closing.Load() {
		// Closing (another connection chose it for the request budget,
		// or a timeout): read nothing more.
		return gnet.Close
	}
	now := time.Now()
	if cs.heldForRate {
		return s.heldTraffic(cs, now)
	}
	if c.InboundBuffered() > 0 {
		cs.lastActive.Store(now.UnixNano())
	}
	cs.refreshOutbound(now)
	// What gnet holds for us is charged again on the way out.
	s.budgets.Request.Release(cs.inCharged)
	cs.reqHeld.Add(-cs.inCharged)
	cs.inCharged = 0
	if act := cs.frame(now); act != gnet.None {
		return act
	}
	if cs.paused.Load() || cs.outSnap > 0 {
		s.watchConn(cs)
	} else {
		s.unwatch(cs)
	}
	// gnet keeps what we left unread (bytes of a connection that waits).
	if n := int64(c.InboundBuffered()); n > 0 {
		if cs.paused.Load() && n > int64(s.cfg.MaxRequestBytes)+(4<<20) {
			s.log.Warn("closing connection: input floods past in-flight limit", "remote", cs.info.RemoteAddr)
			return cs.refuse(closeInboundFlood)
		}
		if !s.reserve(cs, n) {
			// Bytes read already. A goroutine-served connection waiting
			// for answers reads at most a chunk more than it frames, so
			// they are charged anyway; gnet would read on, so its
			// connection is handed off (charged on the streamConn's
			// first pass). Any other is closed.
			switch {
			case cs.closing.Load():
				return gnet.Close
			case isStream(c) && cs.inFlight.Load() > 0:
				s.budgets.Request.Force(n)
				s.budgets.notePeak()
			case cs.paused.Load() && s.waitForBudget(cs, c):
				return gnet.None
			default:
				s.log.Warn("closing connection: request memory budget spent", "buffered", n, "remote", cs.info.RemoteAddr)
				return cs.refuse(closeRequestBudget)
			}
		}
		cs.inCharged = n
		cs.reqHeld.Add(n)
		if cs.paused.Load() && n >= handoffAt {
			// It keeps sending while told to wait: off the event loop,
			// where reads can wait (handoff.go).
			if gc, ok := c.(gnet.Conn); ok && s.handOff(cs, gc) {
				return gnet.None
			}
		}
	}
	return gnet.None
}

// frame reads and dispatches every frame it can. On the event loop.
func (cs *connState) frame(now time.Time) gnet.Action {
	s, c := cs.srv, cs.edge()
	for {
		sock := -1 // bytes the socket holds beyond gnet's read, when asked
		if cs.partial == nil {
			// Between frames: wait here while answers are owed. With
			// the response budget spent, a connection that owes nothing
			// may still have one request in flight, so clients that
			// read keep progressing while others hold the budget (the
			// overshoot: one response per such connection).
			owed := cs.inFlight.Load()
			if owed >= int64(s.cfg.MaxInFlight) || cs.output.Available() <= 0 || cs.muted(now) ||
				(s.budgets.Response.Available() <= 0 && (owed > 0 || cs.output.Used() > 0)) {
				// The drain poller or the write callback wakes us.
				cs.paused.Store(true)
				cs.frameBegan.Store(0) // waiting on us is not the client's delay
				return gnet.None
			}
			cs.paused.Store(false)
			buffered := c.InboundBuffered()
			if buffered > 0 && cs.frameBegan.Load() == 0 {
				cs.frameBegan.Store(now.UnixNano())
			}
			if buffered < 4 {
				if s.obs != nil && buffered > 0 && cs.frameStart.IsZero() {
					cs.frameStart = now
				}
				return gnet.None
			}
			lb, _ := c.Peek(4)
			size := int(int32(binary.BigEndian.Uint32(lb)))
			limit := s.cfg.MaxRequestBytes
			if a := cs.info.Auth; a != nil && a.PreAuth() {
				limit = min(limit, protocol.PreAuthMaxFrame)
			}
			if size < 0 || size > limit {
				s.log.Warn("closing connection: request size out of bounds", "size", size, "limit", limit, "remote", cs.info.RemoteAddr)
				return cs.refuse(closeRequestSize)
			}
			if s.obs != nil && cs.frameStart.IsZero() {
				cs.frameStart = now
			}
			// A whole frame gets its exact buffer; a partial one a
			// buffer for what is here, grown as the rest arrives, or
			// its exact buffer when it arrives at speed and fits.
			// What the socket holds beyond gnet's read has arrived too.
			arrived := buffered
			if size > buffered-4 {
				sock = cs.socketBuffered()
				arrived += sock
			}
			first := min(max(arrived-4, 4<<10), size)
			if size-first <= s.frameRoom(arrived) {
				first = size
			}
			if !s.reserve(cs, int64(first)) {
				// The frame waits, unread, until answers give bytes back.
				if s.waitForBudget(cs, c) {
					cs.frameBegan.Store(0) // waiting on us is not the client's delay
					return gnet.None
				}
				s.log.Warn("closing connection: request memory budget spent", "size", size, "remote", cs.info.RemoteAddr)
				return cs.refuse(closeRequestBudget)
			}
			_, _ = c.Discard(4)
			cs.reqHeld.Add(int64(first))
			key := -1
			if buffered >= 6 {
				head, _ := c.Peek(2)
				key = frameKey(head)
			}
			cs.partial = cs.frameBuf(first, size, key)
			cs.want = size
		}
		if act := cs.fill(sock); act != gnet.None {
			return act
		}
		if len(cs.partial) < cs.want {
			return gnet.None
		}
		frame, pooled := cs.partial, cs.pooled
		held := int64(cap(frame))
		cs.partial, cs.want, cs.pooled = nil, 0, nil
		cs.reqHeld.Add(-held)
		cs.frameBegan.Store(0)
		var read, framed time.Time
		if s.obs != nil {
			read, framed = now, time.Now()
			if !cs.frameStart.IsZero() {
				read, cs.frameStart = cs.frameStart, time.Time{}
			}
		}
		if !cs.dispatch(frame, held, pooled, read, framed) {
			s.budgets.Request.Release(held)
			return cs.refuse(closeBadRequest)
		}
	}
}

// edgeConn is what a connection's state needs of its transport: a gnet
// connection, or a TLS connection (tlsConn) that behaves like one. Input
// methods and OutboundBuffered are called on the connection's loop; the
// others from any goroutine. AsyncWritev's writes happen in call order and
// its callback runs on the loop (its gnet.Conn argument may be nil).
type edgeConn interface {
	Peek(n int) ([]byte, error)
	Discard(n int) (int, error)
	Read(p []byte) (int, error)
	InboundBuffered() int
	OutboundBuffered() int
	AsyncWritev(bs [][]byte, cb gnet.AsyncCallback) error
	Wake(cb gnet.AsyncCallback) error
	Close() error
}

// edgeRef holds an edgeConn for an atomic pointer.
type edgeRef struct{ edgeConn }

// edge is cs's transport now. Any goroutine.
func (cs *connState) edge() edgeConn { return cs.edgeNow.Load().edgeConn }

// connState is one connection's state. Its "loop" is the gnet event loop
// that owns the connection, or a TLS connection's loop lock.
type connState struct {
	srv *Server
	// edgeNow is the transport: set at the start, and replaced once if
	// the event loop hands the socket off to goroutines (handoff.go),
	// under out's lock so that responses are written in order across it.
	edgeNow atomic.Pointer[edgeRef]
	info    *protocol.ConnInfo
	// addr is the client's address as admit counted it; read-only.
	addr netip.Addr

	// nextSeq numbers requests; owned by the event loop.
	nextSeq uint64
	// frameStart is when the first bytes of a frame not yet whole arrived
	// (zero: none pending, or no observer); owned by the event loop.
	frameStart time.Time
	// frameMu guards partial, pooled, want and inCharged: the loop holds
	// it while it frames and when the connection closes; another loop
	// that closes this connection for the request budget takes it
	// (TryLock, never waiting) to give the frame buffer back at once (see
	// reserve).
	frameMu sync.Mutex
	// partial is the frame being read (nil: between frames) and want its
	// size; cap(partial) is charged to the request budget. inCharged is
	// what is charged for the bytes gnet holds for us between calls.
	partial   []byte
	want      int
	inCharged int64
	// pooled is partial's buffer when it came from the frame pool (nil:
	// a fresh one); dropped, not put back, if the frame is abandoned.
	pooled *[]byte
	// outSnap is gnet's outbound buffer as last seen. watched says the
	// drain poller wakes us. Owned by the event loop.
	outSnap int64
	watched bool

	// reqHeld is cap(partial)+inCharged, read by other loops choosing
	// whom to close for the request budget; written on our loop.
	reqHeld atomic.Int64
	// output counts response bytes answered and not yet taken by the
	// socket (queued here or in gnet's outbound buffer); the global
	// response budget counts the same bytes.
	output *protocol.Budget
	// frameBegan is when the frame being read began (unix nanos; 0: none,
	// or we are the ones waiting); outSince is when unsent output last
	// made progress (0: none unsent). Written on the loop, read by OnTick.
	frameBegan atomic.Int64
	outSince   atomic.Int64

	lastActive atomic.Int64 // unix nanos of the last read
	inFlight   atomic.Int64 // requests read, response not yet written
	paused     atomic.Bool  // OnTraffic stopped framing for the limits
	// heldForRate says the connection came over its address's
	// connection-rate quota: it is held unread until its mute ends, then
	// closed (rate.go). Set before it is read; owned by its loop.
	heldForRate bool
	closing     atomic.Bool // a close is asked for: not a victim again
	// evicted is the request bytes it held when another connection
	// closed it for the budget (0: not so closed; evictedGone: its close
	// has run). See evictions.
	evicted atomic.Int64
	closed  atomic.Bool // set under out's lock by OnClose

	out struct {
		sync.Mutex
		nextWrite uint64              // the next sequence number to write
		pending   map[uint64]outFrame // finished responses waiting for their turn
	}
}

// refuse counts why the connection is closed, unless a close was already
// asked for, and returns the action that closes it. On the event loop.
func (cs *connState) refuse(why closeReason) gnet.Action {
	if cs.closing.CompareAndSwap(false, true) {
		cs.srv.closed[why].Add(1)
	}
	return gnet.Close
}

// close asks gnet to close the connection, counting why. Any goroutine.
func (cs *connState) close(why closeReason) {
	if cs.closing.CompareAndSwap(false, true) {
		cs.srv.closed[why].Add(1)
		_ = cs.edge().Close()
	}
}

// releaseOutput gives back n response bytes to the connection's and the
// global budget.
func (cs *connState) releaseOutput(n int64) {
	cs.output.Release(n)
	cs.srv.budgets.Response.Release(n)
}

// refreshOutbound releases what the socket took of gnet's outbound buffer
// since last seen, and notes progress for the write timeout. On the loop.
func (cs *connState) refreshOutbound(now time.Time) {
	ob := int64(cs.edge().OutboundBuffered())
	if ob < cs.outSnap {
		cs.releaseOutput(cs.outSnap - ob)
		cs.outSince.Store(now.UnixNano())
	}
	cs.outSnap = ob
	if ob == 0 {
		cs.outSince.Store(0)
	} else if cs.outSince.Load() == 0 {
		cs.outSince.Store(now.UnixNano())
	}
}

// outFrame is a finished response: its frame (nil: none, acks=0), or its
// parts (bytes and file ranges, held until written or dropped), and the
// request's trace handle (nil: not observed).
type outFrame struct {
	frame []byte
	parts []protocol.Part
	trace protocol.RequestTrace
}

// size is the frame's size in bytes. File ranges count like bytes: they
// are pending output until the socket takes them, and become heap bytes
// in gnet's buffer when the socket does not take them at once.
func (f outFrame) size() int64 {
	if f.parts != nil {
		return int64(protocol.PartsLen(f.parts))
	}
	return int64(len(f.frame))
}

// dispatch decodes a frame and hands it to the handler; false closes the
// connection. held is the request budget the frame holds, released when
// the request is answered. With an observer, read is when the frame's
// first bytes arrived and framed when it was whole. On the event loop.
func (cs *connState) dispatch(frame []byte, held int64, pooled *[]byte, read, framed time.Time) bool {
	s := cs.srv
	req, ok := cs.decode(frame)
	if !ok {
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
	// The decoded request aliases its frame until answered; a pooled
	// frame goes back if its handler freed it (framepool.go).
	release := func() {
		s.budgets.Request.Release(held)
		if pooled != nil && req.FrameFree() {
			frames.Put(pooled)
		}
	}
	req.SetReply(func(resp []byte) {
		release()
		cs.complete(seq, outFrame{frame: resp, trace: tr})
	})
	if cs.info.SendsFiles {
		req.SetReplyParts(func(parts []protocol.Part) {
			release()
			if len(parts) == 0 || parts[0].File != nil {
				// A frame opens with its length prefix; anything else
				// is written as one buffer.
				frame, err := protocol.FlattenParts(parts)
				if err != nil {
					s.log.Error("response parts unreadable", "err", err)
					cs.close(closeSendFailed)
				}
				cs.complete(seq, outFrame{frame: frame, trace: tr})
				return
			}
			cs.complete(seq, outFrame{parts: parts, trace: tr})
		})
	}
	s.handler.Serve(req)
	return true
}

// decode makes a frame a request: a raw SASL token while the connection
// is in SaslHandshake v0's phase, else a header and body. false closes
// the connection (a refused request before authentication is counted as
// closeAuth here). On the event loop.
func (cs *connState) decode(frame []byte) (*protocol.Request, bool) {
	s, auth := cs.srv, cs.info.Auth
	if auth != nil && auth.Raw() {
		return protocol.NewRawSASLRequest(frame), true
	}
	h, body, err := protocol.ParseHeader(frame)
	if err != nil && !errors.Is(err, protocol.ErrUnknownKey) {
		s.log.Warn("closing connection: bad request header", "err", err, "remote", cs.info.RemoteAddr)
		return nil, false
	}
	if auth != nil && !auth.Admits(h.Key, time.Now()) {
		s.log.Warn("closing connection: request not allowed before SASL authentication (or after its session expired)", "key", h.Key, "client_id", h.ClientID, "remote", cs.info.RemoteAddr)
		cs.refuse(closeAuth)
		return nil, false
	}
	req, err := s.handler.Decode(h, body)
	if err != nil {
		s.log.Warn("closing connection: cannot serve request", "err", err, "key", h.Key, "version", h.Version, "client_id", h.ClientID, "remote", cs.info.RemoteAddr)
		return nil, false
	}
	return req, true
}

// complete queues a finished response and writes every response that is
// now next in sequence. Called from any goroutine. Its trace (nil: not
// observed) is told when the response is written.
func (cs *connState) complete(seq uint64, out outFrame) {
	tr := out.trace
	size := out.size()
	cs.out.Lock()
	defer cs.out.Unlock()
	if cs.closed.Load() {
		protocol.ReleaseParts(out.parts)
		cs.done(1)
		if tr != nil {
			tr.Written(net.ErrClosed)
		}
		return
	}
	// Counted from now until the socket takes it (see refreshOutbound).
	cs.output.Force(size)
	cs.srv.budgets.Response.Force(size)
	cs.out.pending[seq] = out
	var batch [][]byte
	// rest holds the parts from the first file range on (nil: none):
	// batch is written first, then rest on the loop (sendfile.go).
	var rest []protocol.Part
	var traces []protocol.RequestTrace // only when some response is observed
	var n, count int64
	for {
		f, ok := cs.out.pending[cs.out.nextWrite]
		if !ok {
			break
		}
		delete(cs.out.pending, cs.out.nextWrite)
		cs.out.nextWrite++
		if f.frame != nil || f.parts != nil {
			n += f.size()
			count++
			switch {
			case rest != nil && f.parts != nil:
				rest = append(rest, f.parts...)
			case rest != nil:
				rest = append(rest, protocol.Part{Bytes: f.frame})
			case f.parts != nil:
				// Bytes up to the first range join the batch.
				i := 0
				for ; i < len(f.parts) && f.parts[i].File == nil; i++ {
					batch = append(batch, f.parts[i].Bytes)
				}
				if i < len(f.parts) {
					rest = append([]protocol.Part(nil), f.parts[i:]...)
				}
			default:
				batch = append(batch, f.frame)
			}
			if f.trace != nil {
				traces = append(traces, f.trace)
			}
		} else {
			cs.done(1)
			if f.trace != nil {
				f.trace.Written(nil)
			}
		}
	}
	if n == 0 {
		return
	}
	// Writes are queued under out's lock, so gnet runs them in sequence.
	// c is the gnet connection written to (nil: a streamConn, which wrote
	// rest itself).
	after := func(c gnet.Conn, err error) error {
		// On the event loop, after gnet wrote what the socket took and
		// buffered the rest.
		if err == nil && rest != nil && c != nil {
			err = cs.writeParts(c, rest)
		}
		protocol.ReleaseParts(rest)
		if err != nil {
			cs.releaseOutput(n)
		} else {
			var ob int64
			if c != nil {
				ob = int64(c.OutboundBuffered())
			}
			if sent := n + cs.outSnap - ob; sent > 0 {
				cs.releaseOutput(sent)
			}
			cs.outSnap = ob
			if ob > 0 && cs.outSince.Load() == 0 {
				cs.outSince.Store(time.Now().UnixNano())
			} else if ob == 0 {
				cs.outSince.Store(0)
			}
			if ob > 0 {
				cs.srv.watchConn(cs)
			}
		}
		cs.done(count)
		written(traces, err)
		return nil
	}
	var err error
	if sc, ok := cs.edge().(*streamConn); ok {
		err = sc.asyncWrite(batch, rest, after)
	} else {
		err = cs.edge().AsyncWritev(batch, after)
	}
	if err != nil {
		protocol.ReleaseParts(rest)
		cs.releaseOutput(n)
		cs.done(count)
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

// done releases in-flight slots and resumes a reader paused for them
// (readers paused for output are resumed by the drain poller).
func (cs *connState) done(requests int64) {
	cs.inFlight.Add(-requests)
	if cs.paused.Load() && cs.inFlight.Load() < int64(cs.srv.cfg.MaxInFlight) && cs.output.Available() > 0 {
		if cs.paused.CompareAndSwap(true, false) && !cs.closed.Load() {
			_ = cs.edge().Wake(nil)
		}
	}
}
