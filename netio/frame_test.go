package netio

import (
	"fmt"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/panjf2000/gnet/v2"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/protocol"
)

// chunkConn is an edgeConn whose input is fed by the test, a chunk at a
// time, as gnet hands a socket's bytes to OnTraffic; its writes complete
// when the test runs their callbacks (flush). One goroutine.
type chunkConn struct {
	in  []byte // fed and not yet read (aliases the test's bytes)
	cbs []gnet.AsyncCallback
}

func (c *chunkConn) Peek(n int) ([]byte, error) { return c.in[:n], nil }
func (c *chunkConn) Discard(n int) (int, error) { c.in = c.in[n:]; return n, nil }
func (c *chunkConn) Read(p []byte) (int, error) {
	n := copy(p, c.in)
	c.in = c.in[n:]
	return n, nil
}
func (c *chunkConn) InboundBuffered() int  { return len(c.in) }
func (c *chunkConn) OutboundBuffered() int { return 0 }
func (c *chunkConn) AsyncWritev(_ [][]byte, cb gnet.AsyncCallback) error {
	c.cbs = append(c.cbs, cb)
	return nil
}
func (c *chunkConn) Wake(gnet.AsyncCallback) error { return nil }
func (c *chunkConn) Close() error                  { return nil }

// flush completes the writes queued so far.
func (c *chunkConn) flush() {
	for _, cb := range c.cbs {
		_ = cb(nil, nil)
	}
	c.cbs = c.cbs[:0]
}

// discardHandler answers every request at once with an empty ApiVersions
// response, ignoring its body: the benchmark measures framing.
type discardHandler struct{}

func (discardHandler) Decode(h protocol.Header, _ []byte) (*protocol.Request, error) {
	return protocol.NewRequest(h, &kmsg.ApiVersionsRequest{Version: h.Version}), nil
}

func (discardHandler) Serve(r *protocol.Request) { r.Respond(&kmsg.ApiVersionsResponse{}) }

// chunkedFrames feeds frames of size bytes to one connection in chunks of
// chunk bytes, as gnet delivers a socket read, and returns the server and
// a function that feeds one frame.
func chunkedFrames(tb testing.TB, cfg Config, size, chunk int) (*Server, *connState, func()) {
	cfg.Logger = slog.New(slog.DiscardHandler)
	s := New(cfg, discardHandler{})
	conn := &chunkConn{}
	cs := s.newConn(conn, netip.Addr{}, "127.0.0.1:1", "127.0.0.1:2", "")
	frame := requestFrame(18, 0, 1, make([]byte, size-11)) // size bytes after the length
	feed := func() {
		for off := 0; off < len(frame); off += chunk {
			conn.in = frame[off:min(off+chunk, len(frame))]
			if act := s.traffic(cs); act != gnet.None {
				tb.Fatalf("traffic closed the connection at byte %d of %d", off, len(frame))
			}
			if len(conn.in) != 0 {
				tb.Fatalf("%d bytes left unread", len(conn.in))
			}
			conn.flush()
		}
	}
	return s, cs, feed
}

// BenchmarkFrameChunks assembles request frames of 16 KiB to 1 MiB that
// arrive in 64 KiB reads: the bytes allocated and copied per frame. With
// the default memory, and with a tight one (request budget 3 MiB) where a
// large frame's rest does not fit the share it may take at once.
func BenchmarkFrameChunks(b *testing.B) {
	const chunk = 64 << 10
	for _, mem := range []struct {
		name string
		max  int64
	}{{"default", 0}, {"tight", 8 << 20}} {
		for _, size := range []int{16 << 10, 100 << 10, 256 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("mem=%s/frame=%dKiB", mem.name, size>>10), func(b *testing.B) {
				benchFrames(b, Config{MaxMemory: mem.max}, size, chunk)
			})
		}
	}
}

func benchFrames(b *testing.B, cfg Config, size, chunk int) {
	s, _, feed := chunkedFrames(b, cfg, size, chunk)
	b.ReportAllocs()
	b.SetBytes(int64(size))
	for b.Loop() {
		feed()
	}
	if u := s.budgets.Request.Used(); u != 0 {
		b.Fatalf("request budget holds %d after the frames", u)
	}
}

// A frame that stops coming holds at most twice what was sent, or, once
// 64 KiB have come, the whole frame when its rest fits a quarter of the
// request budget left; arriving at speed, it is allocated once.
func TestFrameBufferGrowth(t *testing.T) {
	const maxMemory = 64 << 20 // request budget 24 MiB: a quarter is 6 MiB
	for _, c := range []struct {
		name        string
		claim, sent int
		held        int64 // the frame buffer's size after sent bytes
	}{
		{"small start", 8 << 20, 1 << 10, 4 << 10},
		{"under 64 KiB", 8 << 20, 60 << 10, 64 << 10},
		{"rest past the share", 8 << 20, 1 << 20, 1 << 20},
		{"rest fits the share", 6 << 20, 1 << 20, 6 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{MaxMemory: maxMemory, MaxRequestBytes: 16 << 20, Logger: slog.New(slog.DiscardHandler)}
			s := New(cfg, discardHandler{})
			conn := &chunkConn{}
			cs := s.newConn(conn, netip.Addr{}, "127.0.0.1:1", "127.0.0.1:2", "")
			frame := requestFrame(18, 0, 1, make([]byte, c.claim-11))
			for off := 0; off < c.sent; off += 32 << 10 {
				conn.in = frame[off:min(off+32<<10, c.sent)]
				if act := s.traffic(cs); act != gnet.None {
					t.Fatalf("closed at byte %d", off)
				}
			}
			if got := cs.reqHeld.Load(); got != c.held {
				t.Errorf("holds %d after %d of %d bytes, want %d", got, c.sent, c.claim, c.held)
			}
			if got := s.budgets.Request.Used(); got != c.held {
				t.Errorf("request budget used %d, want %d", got, c.held)
			}
		})
	}
}
