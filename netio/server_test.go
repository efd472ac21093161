package netio

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/protocol"
)

// slowHandler answers ApiVersions after a delay that shrinks with the
// correlation id, so later requests finish first.
type slowHandler struct{}

func (slowHandler) Decode(h protocol.Header, body []byte) (*protocol.Request, error) {
	if h.Key != 18 {
		return nil, fmt.Errorf("only ApiVersions")
	}
	return protocol.NewRequest(h, &kmsg.ApiVersionsRequest{Version: h.Version}), nil
}

func (slowHandler) Serve(r *protocol.Request) {
	delay := time.Duration(50-r.CorrelationID%50) * time.Millisecond
	go func() {
		time.Sleep(delay) // simulated work, not synchronization
		r.Respond(&kmsg.ApiVersionsResponse{})
	}()
}

func startServer(t *testing.T, cfg Config) string {
	t.Helper()
	addr, _ := startServerWith(t, cfg, slowHandler{})
	return addr
}

// startServerWith starts a server with handler h on a free loopback port
// and stops it when the test ends.
func startServerWith(t *testing.T, cfg Config, h Handler) (string, *Server) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg.Addr = addr
	s := New(cfg, h)
	done := make(chan error, 1)
	go func() { done <- s.Run() }()
	select {
	case <-s.Booted():
	case err := <-done:
		t.Fatalf("server: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not boot")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
		<-done
	})
	return addr, s
}

func apiVersionsFrame(corr int32) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, 18)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 1)
	b = append(b, 'x')
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func readCorrelation(t *testing.T, r *bufio.Reader) int32 {
	t.Helper()
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		t.Fatalf("read response: %v", err)
	}
	size := binary.BigEndian.Uint32(hdr[:4])
	if _, err := io.CopyN(io.Discard, r, int64(size-4)); err != nil {
		t.Fatal(err)
	}
	return int32(binary.BigEndian.Uint32(hdr[4:]))
}

func TestResponsesInRequestOrder(t *testing.T) {
	addr := startServer(t, Config{MaxInFlight: 16})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	const n = 200 // more than MaxInFlight: exercises pausing and waking
	go func() {
		for i := int32(0); i < n; i++ {
			if _, err := c.Write(apiVersionsFrame(i)); err != nil {
				return
			}
		}
	}()
	r := bufio.NewReader(c)
	for i := int32(0); i < n; i++ {
		if got := readCorrelation(t, r); got != i {
			t.Fatalf("response %d carries correlation id %d", i, got)
		}
	}
}

func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	addr := startServer(t, Config{MaxRequestBytes: 1 << 20})
	good, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	_ = good.SetDeadline(time.Now().Add(30 * time.Second))
	goodR := bufio.NewReader(good)

	bad := [][]byte{
		{0x7f, 0xff, 0xff, 0xff},                    // oversized
		{0xff, 0xff, 0xff, 0xf0},                    // negative size
		{0, 0, 0, 3, 0, 18, 0},                      // header too short
		{0, 0, 0, 10, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0}, // produce: not served by this handler
	}
	for i, frame := range bad {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = c.Write(frame)
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("bad frame %d: connection answered instead of closing", i)
		}
		c.Close()
		// The well-behaved connection still works.
		if _, err := good.Write(apiVersionsFrame(int32(i))); err != nil {
			t.Fatal(err)
		}
		if got := readCorrelation(t, goodR); got != int32(i) {
			t.Fatalf("good connection: correlation %d", got)
		}
	}
}

func TestMaxConnections(t *testing.T) {
	addr := startServer(t, Config{MaxConnections: 2})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = c.Write(apiVersionsFrame(1))
		readCorrelation(t, bufio.NewReader(c))
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = c.Write(apiVersionsFrame(1))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("third connection served past MaxConnections=2")
	}
}
