package netio

import (
	"bufio"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestPerIPLimit: one address's connections are bounded across the
// listeners sharing the limit; one over it is closed unserved and counted
// (max_connections_per_ip); a closed one makes room; an override of 0
// refuses its address.
func TestPerIPLimit(t *testing.T) {
	local := netip.MustParseAddr("127.0.0.1")
	blocked := netip.MustParseAddr("127.0.0.2")
	lim := NewPerIPLimit(2, map[netip.Addr]int{blocked: 0})
	addr1, s1 := startServerWith(t, Config{PerIP: lim}, slowHandler{})
	addr2, _ := startServerWith(t, Config{PerIP: lim}, slowHandler{})

	dial := func(addr string, from netip.Addr) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from.AsSlice()}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = c.Write(apiVersionsFrame(1))
		return c
	}
	served := func(c net.Conn) { t.Helper(); readCorrelation(t, bufio.NewReader(c)) }
	refused := func(c net.Conn, what string) {
		t.Helper()
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("%s: served", what)
		}
	}

	first := dial(addr1, local)
	served(first)
	served(dial(addr2, local))
	refused(dial(addr1, local), "a third connection from 127.0.0.1 (bound 2, over two listeners)")
	refused(dial(addr1, blocked), "a connection from 127.0.0.2 (override 0)")
	if got := s1.closed[closeMaxConnectionsPerIP].Load(); got != 2 {
		t.Fatalf("max_connections_per_ip closes on the first listener: %d, want 2", got)
	}

	first.Close()
	deadline := time.Now().Add(10 * time.Second)
	for lim.Open(local) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("open from 127.0.0.1 after a close: %d, want 1", lim.Open(local))
		}
		time.Sleep(time.Millisecond) // polling interval
	}
	served(dial(addr1, local))
	if lim.Open(blocked) != 0 {
		t.Fatalf("a refused address holds %d", lim.Open(blocked))
	}
}

// TestNoPerIPLimit: nothing to bound makes no limit (nil), which admits
// everything.
func TestNoPerIPLimit(t *testing.T) {
	if NewPerIPLimit(0, nil) != nil {
		t.Fatal("a limit with no bound")
	}
	var l *PerIPLimit
	if !l.acquire(netip.MustParseAddr("127.0.0.1")) {
		t.Fatal("nil limit refused")
	}
	l.release(netip.MustParseAddr("127.0.0.1"))
}

// TestPerIPLimitSet: new bounds apply to the connections accepted after
// them; a max of 0 admits only the addresses overrides names (Kafka's
// max.connections.per.ip=0 with overrides).
func TestPerIPLimitSet(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	l := NewAdjustablePerIPLimit(-1, nil)
	for range 3 {
		if !l.acquire(a) {
			t.Fatal("an unbounded limit refused")
		}
	}
	l.Set(1, nil)
	if l.acquire(a) || !l.acquire(b) || l.acquire(b) {
		t.Fatalf("at max 1: open a %d, b %d", l.Open(a), l.Open(b))
	}
	if l.Open(a) != 3 {
		t.Errorf("a lower bound closed open connections: a holds %d", l.Open(a))
	}
	l.Set(0, map[netip.Addr]int{a: 5})
	l.release(b)
	if l.acquire(b) {
		t.Error("max 0 admitted an address no override names")
	}
	if !l.acquire(a) || !l.acquire(a) || l.acquire(a) {
		t.Errorf("override of 5 with 3 open: a holds %d", l.Open(a))
	}
	l.Set(-1, nil)
	if !l.acquire(b) {
		t.Error("bounds removed, still refused")
	}
}

// TestSetMaxConnections: a lower max.connections refuses the connections
// accepted after it and closes none of those open; a higher one admits
// them again.
func TestSetMaxConnections(t *testing.T) {
	addr, srv := startServerWith(t, Config{MaxConnections: 100}, slowHandler{})
	open := func() (net.Conn, bool) {
		t.Helper()
		c := dial(t, addr)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(apiVersionsFrame(1)); err != nil {
			return c, false
		}
		_, err := bufio.NewReader(c).Peek(4)
		return c, err == nil
	}
	first, ok := open()
	if !ok {
		t.Fatal("the first connection was refused")
	}
	srv.SetMaxConnections(1)
	if _, ok := open(); ok {
		t.Fatal("a second connection was served at max 1")
	}
	if _, err := first.Write(apiVersionsFrame(2)); err != nil {
		t.Fatalf("the open connection after the bound fell: %v", err)
	}
	srv.SetMaxConnections(2)
	if _, ok := open(); !ok {
		t.Fatal("a second connection was refused at max 2")
	}
	if got := srv.closed[closeMaxConnections].Load(); got != 1 {
		t.Errorf("max_connections closes: %d, want 1", got)
	}
}
