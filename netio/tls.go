package netio

// The TLS front door. gnet has no TLS, so a listener with Config.TLS is
// served with crypto/tls over the standard library's listener: a goroutine
// per connection reads and frames (the connection's "loop", under loopMu),
// another writes responses in order. Both drive the same connState as the
// gnet path (framing, dispatch, in-order completion, budgets, in-flight
// and pre-auth limits, the OnTick sweep), through tlsConn, which behaves
// like the parts of gnet.Conn that connState uses. Differences:
//   - a paused connection stops reading its socket (TCP pushes back), so
//     input never piles up past one read;
//   - response bytes are counted until Write returns (for a blocking
//     net.Conn, when the kernel took them) and OutboundBuffered is 0; a
//     Write that makes no progress for WriteTimeout fails on its deadline
//     and closes the connection (the write stall).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// tlsReadChunk is the most one read takes from a TLS connection (a TLS
// record's plaintext is at most 16 KiB).
const tlsReadChunk = 16 << 10

// tlsCoalesce is the size under which a batch of responses is copied into
// one buffer and written with one Write (one TLS record, one syscall).
const tlsCoalesce = 64 << 10

// tlsServer is the TLS front door's state.
type tlsServer struct {
	ln   net.Listener  // set before Booted closes
	done chan struct{} // closed when runTLS returns
	wg   sync.WaitGroup
	mu   struct {
		sync.Mutex
		raw map[net.Conn]struct{} // every accepted socket, for Stop
	}
}

// runTLS serves the TLS listener until Stop.
func (s *Server) runTLS() error {
	s.tls.done = make(chan struct{})
	defer close(s.tls.done)
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("serve tls %s: %w", s.cfg.Addr, err)
	}
	s.tls.ln = ln
	s.tls.mu.raw = map[net.Conn]struct{}{}
	close(s.booted)
	go s.pollDrains()
	go s.tickTLS()
	s.log.Info("listening", "addr", s.cfg.Addr, "tls", true)
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.stopped.Load() || errors.Is(err, net.ErrClosed) {
				break
			}
			// Out of descriptors and the like: wait, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("tls accept", "err", err, "retry_in", backoff)
			select {
			case <-s.stop:
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if s.open.Add(1) > int64(s.cfg.MaxConnections) {
			s.open.Add(-1)
			s.closed[closeMaxConnections].Add(1)
			s.log.Warn("connection refused: limit reached", "limit", s.cfg.MaxConnections, "remote", nc.RemoteAddr().String())
			_ = nc.Close()
			continue
		}
		if !s.trackRaw(nc) {
			s.open.Add(-1)
			_ = nc.Close()
			continue
		}
		s.tls.wg.Add(1)
		if hold := s.connectionThrottle(nc.RemoteAddr()); hold > 0 {
			go s.holdRaw(nc, hold)
			continue
		}
		go s.serveTLS(nc)
	}
	s.tls.wg.Wait()
	s.stopper.Do(func() { close(s.stop) })
	return nil
}

// trackRaw remembers an accepted socket for Stop; false: stopping.
func (s *Server) trackRaw(nc net.Conn) bool {
	s.tls.mu.Lock()
	defer s.tls.mu.Unlock()
	if s.tls.mu.raw == nil {
		return false
	}
	s.tls.mu.raw[nc] = struct{}{}
	return true
}

func (s *Server) untrackRaw(nc net.Conn) {
	s.tls.mu.Lock()
	delete(s.tls.mu.raw, nc)
	s.tls.mu.Unlock()
}

// stopTLS closes the listener and every socket, and waits for runTLS.
func (s *Server) stopTLS(ctx context.Context) error {
	_ = s.tls.ln.Close()
	s.tls.mu.Lock()
	raw := s.tls.mu.raw
	s.tls.mu.raw = nil
	s.tls.mu.Unlock()
	for nc := range raw {
		_ = nc.Close()
	}
	select {
	case <-s.tls.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tickTLS runs the sweep gnet's ticker runs for the gnet path.
func (s *Server) tickTLS() {
	for {
		d, _ := s.OnTick()
		t := time.NewTimer(d)
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// serveTLS handshakes, then reads and frames one connection until it
// closes. Its own goroutine.
func (s *Server) serveTLS(nc net.Conn) {
	defer s.tls.wg.Done()
	defer s.untrackRaw(nc)
	tc := tls.Server(nc, s.cfg.TLS)
	// A handshake is bounded like a frame: a client that opens and says
	// nothing (or speaks plaintext) holds a slot for FrameTimeout at most.
	_ = nc.SetDeadline(time.Now().Add(s.cfg.FrameTimeout))
	if err := tc.HandshakeContext(context.Background()); err != nil {
		s.open.Add(-1)
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			// Gone before a handshake: a port probe (cluster nodes
			// probe each other's listener) or a client that gave up
			// dialing, not a failed client.
			s.log.Debug("connection closed before its TLS handshake", "remote", nc.RemoteAddr().String())
		} else {
			s.closed[closeTLSHandshake].Add(1)
			s.log.Warn("closing connection: TLS handshake failed", "err", err, "remote", nc.RemoteAddr().String())
		}
		_ = nc.Close()
		return
	}
	_ = nc.SetDeadline(time.Time{})
	t := &tlsConn{tc: tc, raw: nc, wake: make(chan struct{}, 1), closed: make(chan struct{}), wnotify: make(chan struct{}, 1)}
	t.in = make([]byte, 0, tlsReadChunk)
	cs := s.newConn(t, nc.RemoteAddr().String(), nc.LocalAddr().String(), PrincipalFromTLS(tc.ConnectionState()))
	t.cs = cs
	s.tls.wg.Add(1)
	go func() {
		defer s.tls.wg.Done()
		t.writeLoop()
	}()
	t.readLoop()
	_ = t.Close()
	t.loopMu.Lock()
	s.closeConn(cs)
	t.loopMu.Unlock()
}

// PrincipalFromTLS is the principal a verified client certificate proves:
// "User:" and its subject's CN (the whole subject DN when it has no CN);
// empty when no verified certificate was presented.
func PrincipalFromTLS(st tls.ConnectionState) string {
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return ""
	}
	sub := st.PeerCertificates[0].Subject
	if sub.CommonName != "" {
		return "User:" + sub.CommonName
	}
	return "User:" + sub.String()
}

// tlsConn is a TLS connection seen as an edgeConn.
type tlsConn struct {
	tc  *tls.Conn
	raw net.Conn // closed to close (no close_notify: it could block)
	cs  *connState

	// loopMu is the connection's loop: the reader's framing, write
	// callbacks and the close run under it, one at a time, as gnet runs
	// them on one event loop.
	loopMu sync.Mutex
	// in[r:] is input read and not yet framed; owned by the loop.
	in []byte
	r  int

	wake      chan struct{} // a paused reader is asked to frame again
	closed    chan struct{} // closed by Close
	closeOnce sync.Once

	wnotify chan struct{} // the writer has jobs
	wmu     struct {
		sync.Mutex
		jobs []writeJob
		done bool // the writer is gone: AsyncWritev fails
	}
}

// writeJob is one AsyncWritev: its buffers, written in order, and the
// callback run on the loop once Write returned.
type writeJob struct {
	bufs [][]byte
	cb   gnet.AsyncCallback
}

// readLoop frames what arrives until the connection closes or is refused.
func (t *tlsConn) readLoop() {
	s := t.cs.srv
	for {
		t.loopMu.Lock()
		act := s.traffic(t.cs)
		paused := t.cs.paused.Load()
		t.loopMu.Unlock()
		if act != gnet.None {
			return
		}
		if paused {
			select {
			case <-t.wake:
				continue
			case <-t.closed:
				return
			}
		}
		// Not paused: everything whole was framed, what is left is the
		// start of a frame (in partial) or under 4 bytes (in t.in).
		if t.r > 0 {
			t.in = t.in[:copy(t.in, t.in[t.r:])]
			t.r = 0
		}
		n, err := t.tc.Read(t.in[len(t.in):cap(t.in)])
		t.in = t.in[:len(t.in)+n]
		if err != nil && n == 0 {
			return
		}
	}
}

func (t *tlsConn) InboundBuffered() int { return len(t.in) - t.r }

func (t *tlsConn) Peek(n int) ([]byte, error) {
	if t.InboundBuffered() < n {
		return nil, errors.New("netio: short peek")
	}
	return t.in[t.r : t.r+n], nil
}

func (t *tlsConn) Discard(n int) (int, error) {
	n = min(n, t.InboundBuffered())
	t.r += n
	return n, nil
}

func (t *tlsConn) Read(p []byte) (int, error) {
	n := copy(p, t.in[t.r:])
	t.r += n
	if t.r == len(t.in) {
		t.in, t.r = t.in[:0], 0
	}
	return n, nil
}

// OutboundBuffered is 0: bytes are counted until Write returns, not past.
func (t *tlsConn) OutboundBuffered() int { return 0 }

// Wake asks a paused reader to frame again. cb must be nil.
func (t *tlsConn) Wake(gnet.AsyncCallback) error {
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return nil
}

// Close closes the socket; the reader then runs the connection's close.
// Any goroutine, any number of times.
func (t *tlsConn) Close() error {
	t.closeOnce.Do(func() {
		close(t.closed)
		_ = t.raw.Close()
	})
	return nil
}

// AsyncWritev queues bs for the writer; calls' writes happen in call
// order. cb runs on the loop once the bytes are written or failed.
func (t *tlsConn) AsyncWritev(bs [][]byte, cb gnet.AsyncCallback) error {
	t.wmu.Lock()
	if t.wmu.done {
		t.wmu.Unlock()
		return net.ErrClosed
	}
	t.wmu.jobs = append(t.wmu.jobs, writeJob{bufs: bs, cb: cb})
	t.wmu.Unlock()
	select {
	case t.wnotify <- struct{}{}:
	default:
	}
	return nil
}

// writeLoop writes queued responses in order, each Write bounded by
// WriteTimeout; after a failure or close, the rest fail with their
// callbacks. Its own goroutine.
func (t *tlsConn) writeLoop() {
	s := t.cs.srv
	var (
		jobs    []writeJob
		scratch []byte
		failed  error
	)
	for {
		stopping := false
		select {
		case <-t.wnotify:
		case <-t.closed:
			stopping = true
		}
		t.wmu.Lock()
		jobs, t.wmu.jobs = t.wmu.jobs, jobs[:0]
		if stopping {
			t.wmu.done = true
		}
		t.wmu.Unlock()
		for i := range jobs {
			j := &jobs[i]
			err := failed
			if stopping && err == nil {
				err = net.ErrClosed
			}
			if err == nil {
				scratch, err = t.write(j.bufs, scratch, s.cfg.WriteTimeout)
				if err != nil {
					failed = err
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						s.log.Warn("closing connection: responses not read", "timeout", s.cfg.WriteTimeout, "remote", t.cs.info.RemoteAddr)
						t.cs.close(closeWriteStall)
					} else {
						_ = t.Close() // the peer went away: nothing to count
					}
				}
			}
			if j.cb != nil {
				t.loopMu.Lock()
				_ = j.cb(nil, err)
				t.loopMu.Unlock()
			}
			*j = writeJob{}
		}
		if stopping {
			return
		}
	}
}

// write writes bufs, coalescing small batches into scratch (returned for
// reuse), with a deadline of timeout per Write.
func (t *tlsConn) write(bufs [][]byte, scratch []byte, timeout time.Duration) ([]byte, error) {
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	_ = t.raw.SetWriteDeadline(time.Now().Add(timeout))
	if len(bufs) > 1 && total <= tlsCoalesce {
		scratch = scratch[:0]
		for _, b := range bufs {
			scratch = append(scratch, b...)
		}
		_, err := t.tc.Write(scratch)
		return scratch, err
	}
	for _, b := range bufs {
		if _, err := t.tc.Write(b); err != nil {
			return scratch, err
		}
		_ = t.raw.SetWriteDeadline(time.Now().Add(timeout))
	}
	return scratch, nil
}
