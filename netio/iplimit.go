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
	mu struct {
		sync.Mutex
		max       int                // per address; < 0: none
		overrides map[netip.Addr]int // per named address, 0 or more (0: no connection)
		open      map[netip.Addr]int
	}
}

// NewPerIPLimit bounds every address at max connections (0: unbounded)
// but those overrides names, bounded at their own count (0: refused).
// nil when neither bounds anything.
func NewPerIPLimit(max int, overrides map[netip.Addr]int) *PerIPLimit {
	if max <= 0 && len(overrides) == 0 {
		return nil
	}
	if max <= 0 {
		max = -1
	}
	return NewAdjustablePerIPLimit(max, overrides)
}

// NewAdjustablePerIPLimit is a limit whose bounds Set may change later,
// bounding nothing until then if max < 0 and overrides is empty. Here, as
// in Kafka's max.connections.per.ip, a max of 0 admits only the addresses
// overrides names.
func NewAdjustablePerIPLimit(max int, overrides map[netip.Addr]int) *PerIPLimit {
	l := &PerIPLimit{}
	l.mu.max, l.mu.overrides = max, overrides
	l.mu.open = map[netip.Addr]int{}
	return l
}

// Set replaces the bounds (max < 0: none) for the connections accepted
// from now on; those open stay, even over a lower bound, as in Kafka.
func (l *PerIPLimit) Set(max int, overrides map[netip.Addr]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.max, l.mu.overrides = max, overrides
}

// bound is a's bound (-1: none). Under l.mu.
func (l *PerIPLimit) bound(a netip.Addr) int {
	if n, ok := l.mu.overrides[a]; ok {
		return n
	}
	return max(l.mu.max, -1)
}

// acquire counts a connection from a; false (nothing counted) when a is at
// its bound.
func (l *PerIPLimit) acquire(a netip.Addr) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.bound(a); b >= 0 && l.mu.open[a] >= b {
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
	if s.open.Add(1) > s.maxConns.Load() {
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

// SetMaxConnections changes MaxConnections for the connections accepted
// from now on (Kafka's max.connections, changed at runtime); those open
// stay.
func (s *Server) SetMaxConnections(n int) { s.maxConns.Store(int64(max(n, 0))) }

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
		s.log.Warn("connection refused: limit reached", "limit", s.maxConns.Load(), "remote", remote)
	default:
		s.log.Debug("connection refused: its address is at max.connections.per.ip", "remote", remote)
	}
}
