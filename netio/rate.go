package netio

import (
	"net"
	"net/netip"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// Connection-rate quotas (connection_creation_rate on ip entities,
// KIP-612): a connection from an address over its quota is not served.
// As Kafka's acceptor does, it is held open, unread, for the throttle time
// (so the client does not reconnect at once) and then closed; it was
// never counted against the address's rate. A held connection that sends
// more than a first request's worth is closed at once.

// heldInputLimit is what a held connection may send before it is closed
// early: a client's first requests (ApiVersions, a SASL handshake) fit.
const heldInputLimit = 64 << 10

// connectionThrottle asks the quota how long to hold a new connection from
// remote (0: serve it).
func (s *Server) connectionThrottle(remote net.Addr) time.Duration {
	if s.cfg.ConnectionThrottle == nil {
		return 0
	}
	addr, ok := addrOf(remote)
	if !ok {
		return 0
	}
	return s.cfg.ConnectionThrottle(addr, time.Now())
}

// addrOf is a connection's remote address, IPv4-mapped addresses unmapped.
func addrOf(remote net.Addr) (netip.Addr, bool) {
	if t, ok := remote.(*net.TCPAddr); ok {
		a, ok := netip.AddrFromSlice(t.IP)
		return a.Unmap(), ok
	}
	ap, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}

// holdForRate holds cs for hold and then closes it. On cs's loop (OnOpen),
// before anything of it is read: the drain poller wakes it until then.
func (s *Server) holdForRate(cs *connState, hold time.Duration) {
	cs.heldForRate = true
	cs.info.Mute.Extend(time.Now().Add(hold))
	s.watchConn(cs)
	// Counted in the closed-connection metrics (reason connection_rate);
	// a line each would flood the log under the storm the quota stops.
	s.log.Debug("connection held, then closed: over its address's connection_creation_rate quota", "remote", cs.info.RemoteAddr, "hold", hold)
}

// heldTraffic is a held connection's traffic: nothing is read; it is
// closed once its hold ends, or at once if it floods. On cs's loop.
func (s *Server) heldTraffic(cs *connState, now time.Time) gnet.Action {
	if cs.muted(now) && cs.edge().InboundBuffered() <= heldInputLimit {
		s.watchConn(cs)
		return gnet.None
	}
	s.unwatch(cs)
	return cs.refuse(closeConnectionRate)
}

// holdRaw holds a TLS listener's socket over its connection-rate quota,
// before any handshake, and then closes it. Its own goroutine (one of
// s.tls.wg); a stop closes it at once.
func (s *Server) holdRaw(nc net.Conn, addr netip.Addr, hold time.Duration) {
	defer s.tls.wg.Done()
	s.log.Debug("connection held, then closed: over its address's connection_creation_rate quota", "remote", nc.RemoteAddr().String(), "hold", hold)
	t := time.NewTimer(hold)
	select {
	case <-s.stop:
	case <-t.C:
	}
	t.Stop()
	s.closed[closeConnectionRate].Add(1)
	s.untrackRaw(nc)
	_ = nc.Close()
	s.release(addr)
}
