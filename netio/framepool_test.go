package netio

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/protocol"
)

// keepingHandler serves produce-keyed frames (v3, so the header is not
// flexible): it checks each body holds its correlation id's fill byte,
// keeps the bodies of odd ids without freeing their frames, and frees the
// frames of even ones.
type keepingHandler struct {
	t    *testing.T
	mu   sync.Mutex
	kept map[int32][]byte
}

func (h *keepingHandler) Decode(hd protocol.Header, body []byte) (*protocol.Request, error) {
	if hd.Key != produceKey {
		return nil, fmt.Errorf("only key 0")
	}
	req := &kmsg.ProduceRequest{Version: hd.Version}
	r := protocol.NewRequest(hd, req)
	h.mu.Lock()
	h.kept[-1-hd.CorrelationID] = body // parked until Serve
	h.mu.Unlock()
	return r, nil
}

func (h *keepingHandler) Serve(r *protocol.Request) {
	h.mu.Lock()
	body := h.kept[-1-r.CorrelationID]
	delete(h.kept, -1-r.CorrelationID)
	if bytes.Count(body, []byte{byte(r.CorrelationID)}) != len(body) {
		h.t.Errorf("request %d: body not its own when served", r.CorrelationID)
	}
	if r.CorrelationID%2 == 1 {
		h.kept[r.CorrelationID] = body
	} else {
		r.FreeFrame()
	}
	h.mu.Unlock()
	r.Respond(&kmsg.ProduceResponse{})
}

// TestFramesReusedOnlyWhenFreed: produce frames whose handler freed them go
// back to the pool, and the frames of requests that did not free them keep
// their bytes however many frames follow.
func TestFramesReusedOnlyWhenFreed(t *testing.T) {
	h := &keepingHandler{t: t, kept: map[int32][]byte{}}
	addr, _ := startServerWith(t, Config{}, h)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	const n, size = 200, 64 << 10
	go func() {
		w := bufio.NewWriter(c)
		for i := range int32(n) {
			f := requestFrame(produceKey, 3, i, bytes.Repeat([]byte{byte(i)}, size))
			if _, err := w.Write(f); err != nil {
				return
			}
		}
		_ = w.Flush()
	}()
	r := bufio.NewReader(c)
	for i := range int32(n) {
		if got := readCorrelation(t, r); got != i {
			t.Fatalf("response %d: correlation %d", i, got)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.kept) != n/2 {
		t.Fatalf("kept %d bodies, want %d", len(h.kept), n/2)
	}
	for id, body := range h.kept {
		if len(body) != size || bytes.Count(body, []byte{byte(id)}) != size {
			t.Errorf("request %d: a kept frame was reused", id)
		}
	}
}
