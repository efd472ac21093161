package netio

// The TLS front door. gnet has no TLS, so a listener with Config.TLS is
// served with crypto/tls over the standard library's listener: a goroutine
// per connection reads and frames (the connection's "loop", under loopMu),
// another writes responses in order. Both drive the same connState as the
// gnet path (framing, dispatch, in-order completion, budgets, in-flight
// and pre-auth limits, the OnTick sweep), through streamConn, which behaves
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
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// tlsServer is the state of connections served by goroutines: the TLS
// front door's, and (wg, mu) plaintext connections handed off by the
// event loop (handoff.go).
type tlsServer struct {
	ln   net.Listener   // set before Booted closes
	done chan struct{}  // closed when runTLS returns
	wg   sync.WaitGroup // their goroutines
	mu   struct {
		sync.Mutex
		raw map[net.Conn]struct{} // every socket goroutines serve (nil: stopping), for Stop
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
		addr, reason, ok := s.admit(nc.RemoteAddr())
		if !ok {
			s.closed[reason].Add(1)
			s.refuseLog(reason, nc.RemoteAddr().String())
			_ = nc.Close()
			continue
		}
		if !s.trackRaw(nc) {
			s.release(addr)
			_ = nc.Close()
			continue
		}
		s.tls.wg.Add(1)
		if hold := s.connectionThrottle(nc.RemoteAddr()); hold > 0 {
			go s.holdRaw(nc, addr, hold)
			continue
		}
		go s.serveTLS(nc, addr)
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

// closeRaw closes every socket served by goroutines (TLS ones, handed-off
// ones) and refuses more.
func (s *Server) closeRaw() {
	s.tls.mu.Lock()
	raw := s.tls.mu.raw
	s.tls.mu.raw = nil
	s.tls.mu.Unlock()
	for nc := range raw {
		_ = nc.Close()
	}
}

// stopTLS closes the listener and every socket, and waits for runTLS.
func (s *Server) stopTLS(ctx context.Context) error {
	_ = s.tls.ln.Close()
	s.closeRaw()
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
func (s *Server) serveTLS(nc net.Conn, addr netip.Addr) {
	defer s.tls.wg.Done()
	defer s.untrackRaw(nc)
	tc := tls.Server(nc, s.cfg.TLS)
	// A handshake is bounded like a frame: a client that opens and says
	// nothing (or speaks plaintext) holds a slot for FrameTimeout at most.
	_ = nc.SetDeadline(time.Now().Add(s.cfg.FrameTimeout))
	if err := tc.HandshakeContext(context.Background()); err != nil {
		s.release(addr)
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
	t := newStreamConn(tc, nc, tlsReadChunk, nil)
	t.cs = s.newConn(t, addr, nc.RemoteAddr().String(), nc.LocalAddr().String(), PrincipalFromTLS(tc.ConnectionState()))
	t.serve()
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
