package netio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regent-broker/regent/netio/certs"
	"github.com/regent-broker/regent/netio/tlstest"
	"github.com/regent-broker/regent/storage"
)

// paddedFrame is frame with pad more bytes in its body (handlers read the
// body's start).
func paddedFrame(frame []byte, pad int) []byte {
	frame = append(frame, make([]byte, pad)...)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame
}

// A connection that keeps sending while its requests wait is handed off
// the event loop: its socket is no longer read, so the client's writes
// wait (TCP pushes back) and the broker holds a few MiB of the 64 MiB it
// sends, not all of it; nothing is closed, and once the requests are
// answered every one of them is served, in order, and nothing stays
// counted.
func TestFloodWhilePausedIsHandedOff(t *testing.T) {
	h := heldHandler{release: make(chan struct{})}
	addr, srv := startServerWith(t, Config{MaxInFlight: 2, MaxRequestBytes: 1 << 20, MaxMemory: 256 << 20}, h)
	c := dial(t, addr)
	const n = 1000 // 64 KiB each: 64 MiB, far past what socket buffers hold
	var sent atomic.Int64
	writeDone := make(chan error, 1)
	go func() {
		_ = c.SetWriteDeadline(time.Now().Add(60 * time.Second))
		for i := range int32(n) {
			if _, err := c.Write(paddedFrame(bigFetchFrame(i, 0), 64<<10)); err != nil {
				writeDone <- err
				return
			}
			sent.Add(1)
		}
		writeDone <- nil
	}()
	if !pollUntil(10*time.Second, func() bool { return srv.MemoryStats().HandedOff > 0 }) {
		t.Fatalf("not handed off; request budget used %d", budgetUse(srv, "request"))
	}
	// The client is held back: it cannot get through its requests while
	// none is answered.
	select {
	case err := <-writeDone:
		t.Fatalf("the client wrote all %d requests (err %v) while none was answered", n, err)
	default:
	}
	t.Logf("handed off after %d requests sent; request budget peak %d", sent.Load(), budgetPeak(srv))
	if p := budgetPeak(srv); p > 4<<20 {
		t.Fatalf("request budget peaked at %d bytes: input piled up", p)
	}
	close(h.release)
	readInOrder(t, c, n)
	if err := <-writeDone; err != nil {
		t.Fatalf("client write: %v", err)
	}
	for _, why := range []string{"inbound_flood", "request_budget", "write_stall"} {
		if k := closedFor(srv, why); k != 0 {
			t.Fatalf("%d connections closed for %s", k, why)
		}
	}
	if p := budgetPeak(srv); p > 4<<20 {
		t.Fatalf("request budget peaked at %d bytes", p)
	}
	_ = c.Close()
	if !pollUntil(5*time.Second, func() bool {
		return budgetUse(srv, "request") == 0 && budgetUse(srv, "response") == 0 && srv.OpenConnections() == 0
	}) {
		t.Fatalf("accounting not back to zero: request %d, response %d, open %d", budgetUse(srv, "request"), budgetUse(srv, "response"), srv.OpenConnections())
	}
}

// A client that stops reading its fetch responses (file ranges) and keeps
// sending is handed off while gnet still holds responses for it: once it
// reads again it gets every response in request order with the stored
// bytes, those from before the handoff (sendfile, gnet's buffer) and after
// (sendfile from the streamConn's writer). Stop then closes the handed-off
// connection and returns.
func TestHandoffWithResponsesPending(t *testing.T) {
	l := bigLog(t, 400, 20<<10, 64<<20)
	// The client's receive buffer is fixed (no autotuning), so the
	// sockets absorb at most a few MiB (the sender's buffer grows to 4
	// MiB): of the 8 MiB of output that pauses the connection, gnet
	// still holds some at the handoff.
	addr, srv := startServerWith(t, Config{MaxPendingBytes: 8 << 20, MaxMemory: 256 << 20}, rangeHandler{log: l})
	c := dial(t, addr)
	_ = c.(*net.TCPConn).SetReadBuffer(256 << 10)
	const n = 400
	size := func(i int32) int { return 1 + int(i%7)*40<<10 }
	go func() {
		_ = c.SetWriteDeadline(time.Now().Add(60 * time.Second))
		for i := range int32(n) {
			f := rangeFrame(i, int64(i), size(i))
			if i%2 == 1 {
				f = paddedFrame(f, 64<<10) // requests that flood
			}
			if _, err := c.Write(f); err != nil {
				return
			}
		}
	}()
	if !pollUntil(10*time.Second, func() bool { return srv.MemoryStats().HandedOff > 0 }) {
		t.Fatalf("not handed off; request budget used %d, response %d", budgetUse(srv, "request"), budgetUse(srv, "response"))
	}
	sentBefore, copiedBefore := srv.FileBytes()
	r := readRangeResponses(t, c, l, n, size)
	sent, copied := srv.FileBytes()
	t.Logf("sendfile %d bytes (%d before the handoff), copied %d (%d before)", sent, sentBefore, copied, copiedBefore)
	if sent == sentBefore {
		t.Fatal("no file range went out with sendfile after the handoff")
	}
	if srv.handoffWaits.Load() == 0 {
		// Timing decides it: since file ranges go out by sendfile from
		// gnet too, its outbound buffer is sometimes empty at the
		// handoff (1 CI run in 3 at fc24a30). Reported, not asserted.
		t.Log("gnet held no response bytes at the handoff: the wait for them was not exercised in this run")
	}
	if k := closedFor(srv, "inbound_flood") + closedFor(srv, "request_budget"); k != 0 {
		t.Fatalf("%d connections closed", k)
	}
	if !pollUntil(5*time.Second, func() bool { return budgetUse(srv, "response") == 0 && budgetUse(srv, "request") == 0 }) {
		t.Fatalf("accounting not back to zero: response %d, request %d", budgetUse(srv, "response"), budgetUse(srv, "request"))
	}
	// Stop closes the handed-off connection.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		var ne net.Error
		if !errors.As(err, &ne) || ne.Timeout() {
			t.Fatalf("after Stop the client reads %v, want the connection closed", err)
		}
	}
}

// readRangeResponses reads n responses to rangeFrame requests (the i-th
// for size(i) bytes at offset i) and checks their order and bytes; it
// returns the reader for what follows.
func readRangeResponses(t *testing.T, c net.Conn, l *storage.Log, n int32, size func(int32) int) *bufio.Reader {
	t.Helper()
	r := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	for i := range n {
		corr, body := readFrame(t, r)
		if corr != i {
			t.Fatalf("response %d has correlation %d", i, corr)
		}
		if !bytes.Equal(body, mustRead(t, l, int64(i), size(i))) {
			t.Fatalf("response %d: %d bytes differ from the stored batches", i, len(body))
		}
	}
	return r
}

// The handoff's wait for gnet's outbound buffer, made certain: responses
// of bytes (copyHandler), unlike file ranges, stay in gnet's buffer once
// the socket is full, and the client reads nothing until the handoff has
// waited for them. It keeps sending until then (a fixed count was all
// read, now and then, before the output reached the pause, and nothing
// was handed off: 1 run in 20). Then every response arrives in order,
// whole.
func TestHandoffWaitsForGnetsBuffer(t *testing.T) {
	const stored = 200
	l := bigLog(t, stored, 20<<10, 64<<20)
	addr, srv := startServerWith(t, Config{MaxPendingBytes: 8 << 20, MaxMemory: 256 << 20}, copyHandler{rangeHandler{log: l}})
	c := dial(t, addr)
	_ = c.(*net.TCPConn).SetReadBuffer(256 << 10)
	const most = 2000
	size := func(i int32) int { return 64<<10 + int(i%5)*32<<10 }
	var stop atomic.Bool
	var sent atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.SetWriteDeadline(time.Now().Add(60 * time.Second))
		for i := int32(0); i < most && !stop.Load(); i++ {
			if _, err := c.Write(paddedFrame(rangeFrame(i, int64(i%stored), size(i)), 64<<10)); err != nil {
				return
			}
			sent.Store(i + 1)
		}
	}()
	// 8 MiB of output pause the connection; the sockets take at most a
	// few MiB of it, so gnet holds the rest when the handoff begins.
	if !pollUntil(20*time.Second, func() bool { return srv.handoffWaits.Load() > 0 }) {
		t.Fatalf("the handoff did not wait for gnet's buffer: %d requests sent, handed off %d, request budget %d, response %d",
			sent.Load(), srv.MemoryStats().HandedOff, budgetUse(srv, "request"), budgetUse(srv, "response"))
	}
	stop.Store(true)
	r := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	for i := int32(0); ; i++ {
		if i == sent.Load() {
			<-done // the last request may be on its way still
			if i == sent.Load() {
				break
			}
		}
		corr, body := readFrame(t, r)
		if corr != i {
			t.Fatalf("response %d has correlation %d", i, corr)
		}
		if !bytes.Equal(body, mustRead(t, l, int64(i%stored), size(i))) {
			t.Fatalf("response %d: %d bytes differ from the stored batches", i, len(body))
		}
	}
	t.Logf("%d requests sent before the handoff waited", sent.Load())
	if k := closedFor(srv, "inbound_flood") + closedFor(srv, "request_budget") + closedFor(srv, "write_stall"); k != 0 {
		t.Fatalf("%d connections closed", k)
	}
	if !pollUntil(5*time.Second, func() bool { return budgetUse(srv, "response") == 0 && budgetUse(srv, "request") == 0 }) {
		t.Fatalf("accounting not back to zero: response %d, request %d", budgetUse(srv, "response"), budgetUse(srv, "request"))
	}
}

// A connection whose requests in flight hold the whole request budget
// waits, unread, for the budget rather than being closed: once they are
// answered the rest are read and answered too, in order, on a plaintext
// connection (handed off the event loop to wait) and a TLS one.
func TestRequestBudgetWaitsInsteadOfClosing(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		name := "plaintext"
		if useTLS {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			h := heldHandler{release: make(chan struct{})}
			// A request budget of 3 MiB: a dozen of the 40 requests.
			cfg := Config{MaxMemory: 8 << 20}
			var (
				c net.Conn
				f tlsFixture
			)
			if useTLS {
				f = newTLSFixture(t)
				cfg.TLS = f.store(t, certs.ClientAuthNone).ServerConfig()
			}
			addr, srv := startServerWith(t, cfg, h)
			if useTLS {
				c = dialTLS(t, addr, clientConfig(t, f.ca.CertFile, tlstest.Pair{}))
			} else {
				c = dial(t, addr)
			}
			const n = 40
			go func() {
				_ = c.SetWriteDeadline(time.Now().Add(60 * time.Second))
				for i := range int32(n) {
					if _, err := c.Write(paddedFrame(bigFetchFrame(i, 0), 256<<10)); err != nil {
						return
					}
				}
			}()
			if !pollUntil(10*time.Second, func() bool { return srv.budgetWaits.Load() > 0 }) {
				t.Fatalf("never waited for the budget; request budget used %d", budgetUse(srv, "request"))
			}
			if k := closedFor(srv, "request_budget") + closedFor(srv, "inbound_flood"); k != 0 {
				t.Fatalf("%d connections closed", k)
			}
			close(h.release)
			readInOrder(t, c, n)
			if k := closedFor(srv, "request_budget") + closedFor(srv, "inbound_flood"); k != 0 {
				t.Fatalf("%d connections closed", k)
			}
			t.Logf("waited for the budget %d times; request budget peak %d of %d", srv.budgetWaits.Load(), budgetPeak(srv), srv.budgets.Request.Capacity())
			if !pollUntil(5*time.Second, func() bool { return budgetUse(srv, "request") == 0 && budgetUse(srv, "response") == 0 }) {
				t.Fatalf("accounting not back to zero: request %d, response %d", budgetUse(srv, "request"), budgetUse(srv, "response"))
			}
		})
	}
}

// readInOrder reads n responses from c and fails unless they carry
// correlation ids 0..n-1 in order.
func readInOrder(t *testing.T, c net.Conn, n int32) {
	t.Helper()
	r := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	for i := range n {
		if got := readCorrelation(t, r); got != i {
			t.Fatalf("response %d carries correlation %d", i, got)
		}
	}
}
