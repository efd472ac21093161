package netio

// Read backpressure for plaintext connections. gnet reads every readable
// socket: it cannot stop reading one. A connection that keeps sending
// while it is told to wait (its in-flight or output bound reached, or
// muted by a quota) would have what it sends held in memory until a bound
// closed it; a pipelining client (librdkafka's producer allows a million
// requests in flight) against a slow acks=all leader then reconnects and
// floods again, and delivers almost nothing. So past handoffAt bytes
// buffered while paused, the event loop hands the socket off to
// goroutines: a streamConn over a duplicate of its descriptor, which stops
// reading while the connection waits, so TCP pushes back, as on the TLS
// path. The connection keeps its state, its requests in flight and its
// place in every count; the client sees nothing.
//
// The handoff, on the connection's event loop:
//  1. the descriptor is duplicated and wrapped as a net.Conn; what gnet
//     has buffered moves into the streamConn's input (still charged to
//     the request budget);
//  2. under out's lock the connection's transport becomes the streamConn:
//     responses answered from then on queue there, behind every one
//     already handed to gnet;
//  3. a write of nothing is queued on gnet behind those (AsyncWritev's
//     queue is first in, first out): when it runs they are in the socket
//     or gnet's outbound buffer; once that buffer is empty (looked at
//     every handoffPoll, for at most WriteTimeout) the loop closes its
//     side. Bytes gnet reads meanwhile join the streamConn's input
//     (charged, and bounded as a paused connection's input always was:
//     a client that neither reads its responses nor stops sending is
//     closed past MaxRequestBytes+4 MiB);
//  4. gnet's close of its side (OnClose, with the handoff as context)
//     opens the streamConn: its reader frames what it was given, then
//     reads the socket; its writer writes what queued.
//
// gnet's close closes only its own descriptor; the duplicate keeps the
// socket open. A handed-off connection stays on goroutines until it
// closes.

import (
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// handoffAt is how many bytes a paused connection's input may hold on the
// event loop before its socket is handed off: a few of gnet's reads, far
// below any frame bound, so a flooding connection holds little.
const handoffAt = 1 << 20

// handoffPoll is how often a handoff looks again at gnet's outbound
// buffer, which must empty before the loop lets go (gnet says nothing
// when it does).
const handoffPoll = time.Millisecond

// handoff is a socket on its way from gnet to a streamConn: the gnet
// connection's context from the handoff until gnet closes it. Its fields
// other than gone are owned by the gnet event loop.
type handoff struct {
	cs     *connState
	sc     *streamConn
	ready  chan struct{} // sc's: closed when gnet has closed its side
	began  time.Time
	asked  bool // the loop asked gnet to close its side (the socket lives on)
	waited bool // gnet's outbound buffer held bytes when first looked at
	// gone is set once gnet has closed its side (any goroutine reads it).
	gone atomic.Bool
}

// isStream says c is served by goroutines (its reads can wait).
func isStream(c edgeConn) bool {
	_, ok := c.(*streamConn)
	return ok
}

// waitForBudget makes cs wait, unread, for the request budget rather than
// close, when it has requests in flight: as they are answered the budget
// comes back, and closing it made its client reconnect and send them
// again (a pipelining producer then delivered almost nothing). A
// connection with nothing in flight (partial frames, a flood) is closed
// as before: waiting would hold its bytes for others' answers. A
// goroutine-served connection pauses; a gnet one is handed off first
// (gnet would read on). The drain poller wakes paused connections to try
// again. What a waiting connection had read already (a read's worth) is
// charged past the budget. false: cs cannot wait. On cs's loop, holding
// cs.frameMu.
func (s *Server) waitForBudget(cs *connState, c edgeConn) bool {
	if cs.closing.Load() || cs.inFlight.Load() == 0 {
		return false
	}
	if gc, ok := c.(gnet.Conn); ok {
		if !s.handOff(cs, gc) {
			return false
		}
	} else if !isStream(c) {
		return false
	}
	cs.paused.Store(true)
	s.budgetWaits.Add(1)
	return true
}

// handOff moves cs off gnet connection gc as above; false: it could not
// (cs goes on as it was). On gc's event loop, in traffic: holding
// cs.frameMu. What gc has buffered moves to the streamConn with its
// charge (inCharged), if any; uncharged bytes are charged on the
// streamConn's first pass.
func (s *Server) handOff(cs *connState, gc gnet.Conn) bool {
	fd, err := gc.Dup()
	if err != nil {
		s.log.Warn("cannot hand a flooding connection off the event loop", "err", err, "remote", cs.info.RemoteAddr)
		return false
	}
	f := os.NewFile(uintptr(fd), "socket")
	nc, err := net.FileConn(f) // its own duplicate
	_ = f.Close()
	if err != nil {
		s.log.Warn("cannot hand a flooding connection off the event loop", "err", err, "remote", cs.info.RemoteAddr)
		return false
	}
	if !s.trackRaw(nc) { // stopping
		_ = nc.Close()
		return false
	}
	ready := make(chan struct{})
	sc := newStreamConn(nc, nc, plainReadChunk, ready)
	sc.cs = cs
	n := gc.InboundBuffered()
	sc.in = make([]byte, n, max(n, plainReadChunk))
	_, _ = gc.Read(sc.in)
	ho := &handoff{cs: cs, sc: sc, ready: ready, began: time.Now()}
	sc.onClose = func() {
		if !ho.gone.Load() {
			_ = gc.Close()
		}
	}
	gc.SetContext(ho)
	cs.out.Lock()
	cs.edgeNow.Store(&edgeRef{sc})
	cs.out.Unlock()
	s.handoffs.Add(1)
	s.log.Info("connection kept sending while told to wait: its socket leaves the event loop, reads wait", "buffered", n, "in_flight", cs.inFlight.Load(), "remote", cs.info.RemoteAddr)
	s.tls.wg.Add(1)
	go func() {
		defer s.tls.wg.Done()
		defer s.untrackRaw(nc)
		sc.serve()
	}()
	if err := gc.AsyncWritev(nil, ho.drained); err != nil {
		_ = gc.Close()
	}
	return true
}

// drained closes gnet's side once the responses gnet holds have left.
// On the event loop, as a write's callback.
func (ho *handoff) drained(c gnet.Conn, err error) error {
	if err != nil || ho.gone.Load() || ho.asked {
		return nil // closed or closing: OnClose opens the streamConn
	}
	if c.OutboundBuffered() > 0 {
		s := ho.cs.srv
		if !ho.waited {
			ho.waited = true
			s.handoffWaits.Add(1)
		}
		if time.Since(ho.began) > s.cfg.WriteTimeout {
			s.log.Warn("closing connection: responses not read", "timeout", s.cfg.WriteTimeout, "remote", ho.cs.info.RemoteAddr)
			ho.cs.close(closeWriteStall)
			return nil
		}
		time.AfterFunc(handoffPoll, func() {
			if err := c.AsyncWritev(nil, ho.drained); err != nil {
				_ = c.Close()
			}
		})
		return nil
	}
	ho.asked = true
	return c.Close()
}

// handoffTraffic moves what gnet read while the handoff waits into the
// streamConn's input. On the event loop.
func (s *Server) handoffTraffic(ho *handoff, c gnet.Conn) gnet.Action {
	cs := ho.cs
	cs.frameMu.Lock()
	defer cs.frameMu.Unlock()
	if cs.closing.Load() {
		return gnet.Close
	}
	n := c.InboundBuffered()
	if n == 0 {
		return gnet.None
	}
	cs.lastActive.Store(time.Now().UnixNano())
	if len(ho.sc.in)+n > s.cfg.MaxRequestBytes+(4<<20) {
		s.log.Warn("closing connection: input floods past in-flight limit", "remote", cs.info.RemoteAddr)
		return cs.refuse(closeInboundFlood)
	}
	if !s.reserve(cs, int64(n)) {
		if cs.closing.Load() {
			return gnet.Close
		}
		// Read already, and bounded above: charged past the budget
		// (the handoff may be waiting for the budget itself).
		s.budgets.Request.Force(int64(n))
		s.budgets.notePeak()
	}
	cs.inCharged += int64(n)
	cs.reqHeld.Add(int64(n))
	b, _ := c.Next(n)
	ho.sc.in = append(ho.sc.in, b...)
	return gnet.None
}

// handoffClosed opens the streamConn once gnet has closed its side; when
// gnet closed it for another reason (the peer went away, the connection
// was refused), the streamConn closes too and its reader runs the
// connection's close. On the event loop, from OnClose.
func (s *Server) handoffClosed(ho *handoff, c gnet.Conn) {
	cs := ho.cs
	// What gnet held for the peer has left (asked), or cannot (the
	// socket failed): either way it is no longer pending.
	if cs.outSnap > 0 {
		cs.releaseOutput(cs.outSnap)
		cs.outSnap = 0
		cs.outSince.Store(0)
	}
	ho.gone.Store(true)
	if !ho.asked {
		_ = ho.sc.Close()
	}
	close(ho.ready)
}
