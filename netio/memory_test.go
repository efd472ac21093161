package netio

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/protocol"
)

// bigHandler answers ApiVersions at once and "Fetch" (key 1, v4) with a
// response carrying as many record bytes as the request body's first four
// bytes ask for.
type bigHandler struct{}

func (bigHandler) Decode(h protocol.Header, body []byte) (*protocol.Request, error) {
	switch h.Key {
	case 18:
		return protocol.NewRequest(h, &kmsg.ApiVersionsRequest{Version: h.Version}), nil
	case 1:
		if len(body) < 4 {
			return nil, fmt.Errorf("short body")
		}
		return protocol.NewRequest(h, &kmsg.FetchRequest{Version: h.Version, MaxBytes: int32(binary.BigEndian.Uint32(body))}), nil
	}
	return nil, fmt.Errorf("key %d not served", h.Key)
}

func (bigHandler) Serve(r *protocol.Request) {
	f, ok := r.Msg.(*kmsg.FetchRequest)
	if !ok {
		r.Respond(&kmsg.ApiVersionsResponse{})
		return
	}
	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = make([]byte, f.MaxBytes)
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	r.RespondSized(resp, int(f.MaxBytes)+256)
}

// requestFrame builds a v0-header request frame (non-flexible versions).
func requestFrame(key, version int16, corr int32, body []byte) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 1)
	b = append(b, 'x')
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// bigFetchFrame asks bigHandler for a response of n record bytes.
func bigFetchFrame(corr int32, n int) []byte {
	return requestFrame(1, 4, corr, binary.BigEndian.AppendUint32(nil, uint32(n)))
}

// pollUntil calls cond every few milliseconds until it holds or timeout
// passes, and reports whether it held.
func pollUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronization
	}
}

func budgetUse(s *Server, name string) int64 {
	for _, b := range s.MemoryStats().Budgets {
		if b.Name == name {
			return b.Used
		}
	}
	return -1
}

// budgetPeak is the request budget's high-water mark.
func budgetPeak(s *Server) int64 {
	for _, b := range s.MemoryStats().Budgets {
		if b.Name == "request" {
			return b.Peak
		}
	}
	return -1
}

func closedFor(s *Server, reason string) int64 {
	for _, c := range s.MemoryStats().Closed {
		if c.Reason == reason {
			return c.Count
		}
	}
	return -1
}

// roundTrip sends one ApiVersions on c and waits for its answer.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, corr int32) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(apiVersionsFrame(corr)); err != nil {
		t.Fatalf("good connection write: %v", err)
	}
	if got := readCorrelation(t, r); got != corr {
		t.Fatalf("good connection: correlation %d, want %d", got, corr)
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A client that pipelines requests for big responses and never reads is
// paused at its output bound, closed after the write timeout, and every
// byte it held is given back; another connection is served meanwhile.
func TestNeverReadingClientIsClosed(t *testing.T) {
	const (
		pendingBound = 4 << 20
		respSize     = 1 << 20
	)
	addr, srv := startServerWith(t, Config{MaxPendingBytes: pendingBound, WriteTimeout: time.Second, MaxMemory: 64 << 20}, bigHandler{})
	bad := dial(t, addr)
	if tc, ok := bad.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(64 << 10) // a small window: the server's outbound buffer fills
	}
	go func() {
		_ = bad.SetWriteDeadline(time.Now().Add(20 * time.Second))
		for i := int32(0); i < 400; i++ {
			if _, err := bad.Write(bigFetchFrame(i, respSize)); err != nil {
				return
			}
		}
	}()
	good := dial(t, addr)
	goodR := bufio.NewReader(good)

	var peak int64
	corr := int32(0)
	closed := pollUntil(15*time.Second, func() bool {
		peak = max(peak, budgetUse(srv, "response"))
		roundTrip(t, good, goodR, corr)
		corr++
		return closedFor(srv, "write_stall") > 0
	})
	if !closed {
		t.Fatalf("never-reading client not closed; response budget used %d", budgetUse(srv, "response"))
	}
	// The bound plus what the requests already in flight answered (the
	// socket's own buffers are the kernel's, not counted).
	if limit := int64(pendingBound + 2*respSize); peak > limit {
		t.Errorf("response bytes peaked at %d, bound %d", peak, limit)
	}
	if !pollUntil(10*time.Second, func() bool {
		return budgetUse(srv, "response") == 0 && budgetUse(srv, "request") == 0
	}) {
		t.Fatalf("accounting not back to zero: response %d, request %d", budgetUse(srv, "response"), budgetUse(srv, "request"))
	}
	t.Logf("response bytes peaked at %d (bound %d); %d good round trips meanwhile", peak, pendingBound, corr)
}

// A reader that is slow but reads gets every response in order and leaves
// nothing counted.
func TestSlowReaderGetsEverything(t *testing.T) {
	addr, srv := startServerWith(t, Config{MaxPendingBytes: 2 << 20, MaxMemory: 64 << 20}, bigHandler{})
	c := dial(t, addr)
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	const n = 64
	go func() {
		for i := int32(0); i < n; i++ {
			if _, err := c.Write(bigFetchFrame(i, 256<<10)); err != nil {
				return
			}
		}
	}()
	r := bufio.NewReaderSize(c, 4<<10)
	for i := int32(0); i < n; i++ {
		if got := readCorrelation(t, r); got != i {
			t.Fatalf("response %d carries correlation %d", i, got)
		}
	}
	if !pollUntil(5*time.Second, func() bool { return budgetUse(srv, "response") == 0 && budgetUse(srv, "request") == 0 }) {
		t.Fatalf("accounting not back to zero: response %d, request %d", budgetUse(srv, "response"), budgetUse(srv, "request"))
	}
}

// Half-sent frames over many connections stay within the request budget:
// connections are closed rather than the budget passed, and a connection
// with small requests keeps being served. The budget's exact high-water
// mark (not a sample) never passes the capacity, on one event loop or
// several: a victim's frame buffer is given back before its bytes are
// taken, and these connections leave no bytes in gnet's buffers (the only
// bytes lent ahead of a close).
func TestPartialFramesStayWithinBudget(t *testing.T) {
	const maxMemory = 16 << 20 // request budget 6 MiB
	const reqCap = int64(maxMemory * 3 / 8)
	for _, tc := range []struct {
		name      string
		multicore bool
	}{
		{"one_loop", false},
		{"multicore", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, srv := startServerWith(t, Config{MaxRequestBytes: 8 << 20, MaxMemory: maxMemory, Multicore: tc.multicore}, bigHandler{})
			partialFramesFlood(t, addr, srv, reqCap)
		})
	}
}

// partialFramesFlood has 12 connections each claim an 8 MiB frame and send
// 4 MiB of it, checks that the request budget's use peaked within its
// capacity reqCap and that a small-request connection was served
// throughout.
func partialFramesFlood(t *testing.T, addr string, srv *Server, reqCap int64) {
	good := dial(t, addr)
	goodR := bufio.NewReader(good)

	const conns = 12
	chunk := make([]byte, 256<<10)
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		c := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			// Claim 8 MiB, send 4 MiB of it, then hold.
			if _, err := c.Write(binary.BigEndian.AppendUint32(nil, 8<<20)); err != nil {
				return
			}
			for sent := 0; sent < 4<<20; sent += len(chunk) {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}()
	}
	corr := int32(0)
	settled := pollUntil(10*time.Second, func() bool {
		roundTrip(t, good, goodR, corr)
		corr++
		return closedFor(srv, "request_budget") > 0 && srv.OpenConnections() < conns
	})
	wg.Wait()
	if !settled {
		t.Fatalf("no connection closed for the request budget; used %d of %d", budgetUse(srv, "request"), reqCap)
	}
	peak := budgetPeak(srv)
	if peak > reqCap {
		t.Errorf("request bytes peaked at %d, budget %d", peak, reqCap)
	}
	roundTrip(t, good, goodR, corr)
	t.Logf("request bytes peaked at %d of %d; %d connections closed for the budget", peak, reqCap, closedFor(srv, "request_budget"))
}

// A connection that trickles a frame is closed after FrameTimeout, while
// another is served.
func TestTricklingFrameIsClosed(t *testing.T) {
	const timeout = 400 * time.Millisecond
	addr, srv := startServerWith(t, Config{FrameTimeout: timeout}, bigHandler{})
	good := dial(t, addr)
	goodR := bufio.NewReader(good)
	slow := dial(t, addr)
	frame := apiVersionsFrame(7)
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for i := 0; i < len(frame)-1; i++ { // never the last byte
			if _, err := slow.Write(frame[i : i+1]); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	corr := int32(0)
	if !pollUntil(10*time.Second, func() bool {
		roundTrip(t, good, goodR, corr)
		corr++
		return closedFor(srv, "frame_timeout") > 0
	}) {
		t.Fatal("trickling connection not closed")
	}
	if took := time.Since(start); took < timeout {
		t.Errorf("closed after %v, before the %v frame timeout", took, timeout)
	}
	_ = slow.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := slow.Read(make([]byte, 1)); err == nil {
		t.Fatal("trickling connection still open")
	}
}

func TestGrowFrame(t *testing.T) {
	for _, c := range []struct{ cur, need, want, room, got int }{
		{0, 10, 100, 0, 100},                                  // small frames: whole at once
		{0, 1 << 20, 99 << 20, 0, 1 << 20},                    // what has arrived
		{1 << 20, 1<<20 + 1, 99 << 20, 0, 2 << 20},            // doubled
		{96 << 20, 97 << 20, 99 << 20, 0, 99 << 20},           // never past the frame
		{64 << 10, 80 << 20, 99 << 20, 0, 80 << 20},           // what has arrived, when more
		{0, 0, 0, 0, 0},                                       // empty frame
		{0, 100 << 10, 200 << 10, 0, 100 << 10},               // above the minimum step
		{0, 1, 1 << 20, 0, 64 << 10},                          // the minimum step
		{64 << 10, 65 << 10, 1 << 20, 0, 128 << 10},           // 64 KiB doubled
		{80 << 10, 81 << 10, 90 << 10, 0, 90 << 10},           // capped at the frame
		{100 << 10, 90 << 10, 1 << 20, 0, 200 << 10},          // grows even if need < cur (not called so)
		{64 << 10, 65 << 10, 1 << 20, 960 << 10, 1 << 20},     // the rest fits the room: the whole frame
		{64 << 10, 65 << 10, 1 << 20, 960<<10 - 1, 128 << 10}, // a byte short: doubled
		{8 << 20, 8<<20 + 1, 99 << 20, 1 << 20, 16 << 20},     // room far short of the claim
	} {
		if got := growFrame(c.cur, c.need, c.want, c.room); got != c.got {
			t.Errorf("growFrame(%d, %d, %d, %d) = %d, want %d", c.cur, c.need, c.want, c.room, got, c.got)
		}
	}
}

// heldHandler answers nothing until release is closed.
type heldHandler struct{ release chan struct{} }

func (h heldHandler) Decode(hd protocol.Header, body []byte) (*protocol.Request, error) {
	return bigHandler{}.Decode(hd, body)
}

func (h heldHandler) Serve(r *protocol.Request) {
	go func() {
		<-h.release
		r.Respond(&kmsg.ApiVersionsResponse{})
	}()
}
