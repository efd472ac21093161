package netio

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/protocol"
)

// patternBody is request corr's body of n bytes: every byte depends on its
// position and the request, so a byte out of place or from another frame
// shows.
func patternBody(corr int32, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8 + int(corr)*13)
	}
	return b
}

// patternHandler checks that each produce-keyed body (v3 header) is the
// pattern of its correlation id, of the size the id's index in sizes says.
type patternHandler struct {
	t     *testing.T
	sizes []int
	mu    sync.Mutex
	bad   []string
}

func (h *patternHandler) Decode(hd protocol.Header, body []byte) (*protocol.Request, error) {
	want := patternBody(hd.CorrelationID, h.sizes[int(hd.CorrelationID)%len(h.sizes)])
	if string(body) != string(want) {
		h.mu.Lock()
		h.bad = append(h.bad, fmt.Sprintf("request %d: body of %d bytes is not its own (want %d)", hd.CorrelationID, len(body), len(want)))
		h.mu.Unlock()
	}
	return protocol.NewRequest(hd, &kmsg.ProduceRequest{Version: hd.Version}), nil
}

func (h *patternHandler) Serve(r *protocol.Request) {
	r.FreeFrame()
	r.Respond(&kmsg.ProduceResponse{})
}

// TestFramesReadStraightFromSocket: frames of many sizes, pipelined and
// written in random pieces with pauses between some, arrive whole and in
// order, and the bytes of large ones are read straight from the socket
// into their buffers (past gnet's read buffer).
func TestFramesReadStraightFromSocket(t *testing.T) {
	sizes := []int{10, 4 << 10, readBufferBytes - 30, readBufferBytes + 1, 70 << 10, 300 << 10, 1<<20 + 3, 100}
	h := &patternHandler{t: t, sizes: sizes}
	addr, srv := startServerWith(t, Config{}, h)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	const n = 80
	var stream []byte
	for i := range int32(n) {
		f := requestFrame(produceKey, 3, i, patternBody(i, sizes[int(i)%len(sizes)]))
		stream = append(stream, f...)
	}
	go func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for len(stream) > 0 {
			k := min(len(stream), 1+rng.IntN(200<<10))
			if _, err := c.Write(stream[:k]); err != nil {
				return
			}
			stream = stream[k:]
			if rng.IntN(4) == 0 {
				// Let the server read a part alone.
				time.Sleep(time.Millisecond)
			}
		}
	}()
	r := bufio.NewReader(c)
	for i := range int32(n) {
		if got := readCorrelation(t, r); got != i {
			t.Fatalf("response %d: correlation %d", i, got)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.bad {
		t.Error(b)
	}
	if srv.socketBytes.Load() == 0 {
		t.Error("no request bytes were read straight from the socket")
	}
	t.Logf("%d request bytes read straight from the socket", srv.socketBytes.Load())
}
