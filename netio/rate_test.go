package netio

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/regent-broker/regent/netio/certs"
	"github.com/regent-broker/regent/netio/tlstest"
)

// TestConnectionRateHold: a connection the connection-rate quota throttles
// is held unread for the throttle time and then closed, on plaintext and
// TLS listeners; the next one, within the quota, is served; the quota sees
// the connection's remote address.
func TestConnectionRateHold(t *testing.T) {
	const hold = 300 * time.Millisecond
	f := newTLSFixture(t)
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"plaintext", false}, {"tls", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			var seen atomic.Value
			cfg := Config{ConnectionThrottle: func(addr netip.Addr, _ time.Time) time.Duration {
				seen.Store(addr)
				if calls.Add(1) == 1 {
					return hold
				}
				return 0
			}}
			if tc.tls {
				cfg.TLS = f.store(t, certs.ClientAuthNone).ServerConfig()
			}
			addr, s := startServerWith(t, cfg, slowHandler{})
			dial := func() net.Conn {
				if tc.tls {
					return dialTLS(t, addr, clientConfig(t, f.ca.CertFile, tlstest.Pair{}))
				}
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			// Held: no TLS handshake, no answer, then closed.
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			if !tc.tls {
				if _, err := c.Write(apiVersionsFrame(1)); err != nil {
					t.Fatal(err)
				}
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := c.Read(make([]byte, 64))
			took := time.Since(start)
			if n != 0 || (!errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET)) {
				t.Fatalf("held connection: read %d bytes, %v; want closed unanswered", n, err)
			}
			if took < hold-20*time.Millisecond || took > hold+time.Second {
				t.Fatalf("held connection closed after %v, want about %v", took, hold)
			}
			if a, _ := seen.Load().(netip.Addr); a != netip.MustParseAddr("127.0.0.1") {
				t.Fatalf("quota asked about %v", a)
			}
			// The next: served.
			c2 := dial()
			if _, err := c2.Write(apiVersionsFrame(2)); err != nil {
				t.Fatal(err)
			}
			if got := readCorrelation(t, bufio.NewReader(c2)); got != 2 {
				t.Fatalf("correlation %d", got)
			}
			closed := false
			for _, cs := range s.MemoryStats().Closed {
				closed = closed || (cs.Reason == "connection_rate" && cs.Count == 1)
			}
			if !closed {
				t.Fatalf("closed counts %+v, want one connection_rate", s.MemoryStats().Closed)
			}
		})
	}
}
