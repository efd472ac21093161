package netio

import (
	"net"
	"net/netip"
	"sync"
)

// PerIPLimit bounds the connections open from one client address, across
// every listener sharing it: Kafka's max.connections.per.ip and
// max.connections.per.ip.overrides. A connection over its address's
// bound is closed as soon as it is accepted (reason max_connections_per_ip),
// as Kafka's acceptor closes it. nil: no bound. Safe from any goroutine.
type PerIPLimit struct {
	max       int                // per address; 0: none
	overrides map[netip.Addr]int // per named address, 0 or more (0: no connection)
	mu        struct {
		sync.Mutex
		open map[netip.Addr]int
	}
}

// NewPerIPLimit bounds every address at max connections (0: unbounded)
// but those overrides names, bounded at their own count (0: refused).
// nil when neither bounds anything.
func NewPerIPLimit(max int, overrides map[netip.Addr]int) *PerIPLimit {
	if max <= 0 && len(overrides) == 0 {
		return nil
	}
	l := &PerIPLimit{max: max, overrides: overrides}
	l.mu.open = map[netip.Addr]int{}
	return l
}

// bound is a's bound (-1: none).
func (l *PerIPLimit) bound(a netip.Addr) int {
	if n, ok := l.overrides[a]; ok {
		return n
	}
	if l.max > 0 {
		return l.max
	}
	return -1
}

// acquire counts a connection from a; false (nothing counted) when a is at
// its bound.
func (l *PerIPLimit) acquire(a netip.Addr) bool {
	if l == nil {
		return true
	}
	b := l.bound(a)
	l.mu.Lock()
	defer l.mu.Unlock()
	if b >= 0 && l.mu.open[a] >= b {
		return false
	}
	l.mu.open[a]++
	return true
}

// release forgets a connection acquire counted.
func (l *PerIPLimit) release(a netip.Addr) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.open[a] <= 1 {
		delete(l.mu.open, a) // the map holds only addresses with connections
		return
	}
	l.mu.open[a]--
}

// Open is the number of connections counted for a.
func (l *PerIPLimit) Open(a netip.Addr) int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.open[a]
}

// admit counts a new connection from remote against MaxConnections and
// its address's PerIPLimit; on refusal nothing stays counted and the
// reason is returned. The address is what release takes back.
func (s *Server) admit(remote net.Addr) (addr netip.Addr, refused closeReason, ok bool) {
	if s.open.Add(1) > int64(s.cfg.MaxConnections) {
		s.open.Add(-1)
		return netip.Addr{}, closeMaxConnections, false
	}
	addr, _ = addrOf(remote)
	if !s.cfg.PerIP.acquire(addr) {
		s.open.Add(-1)
		return netip.Addr{}, closeMaxConnectionsPerIP, false
	}
	return addr, 0, true
}

// release gives back what admit counted for a connection from addr.
func (s *Server) release(addr netip.Addr) {
	s.open.Add(-1)
	s.cfg.PerIP.release(addr)
}

// refuseLog says why a connection was refused at accept. Per-address
// refusals are counted, not logged each: a client at its bound that
// retries would fill the log.
func (s *Server) refuseLog(reason closeReason, remote string) {
	switch reason {
	case closeMaxConnections:
		s.log.Warn("connection refused: limit reached", "limit", s.cfg.MaxConnections, "remote", remote)
	default:
		s.log.Debug("connection refused: its address is at max.connections.per.ip", "remote", remote)
	}
}
