package netio

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/regent-broker/regent/netio/certs"
	"github.com/regent-broker/regent/netio/tlstest"
	"github.com/regent-broker/regent/protocol"
	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// rangeHandler answers ApiVersions at once and key 1 (body: offset int64,
// max bytes int32) with a frame of the correlation id and the batches of
// log from offset, as a file range (protocol.Part). With taken and gate
// set, a key 1 answer takes its range, says so on taken and waits for gate.
type rangeHandler struct {
	log         *storage.Log
	taken, gate chan struct{}
}

func (rangeHandler) Decode(h protocol.Header, body []byte) (*protocol.Request, error) {
	switch h.Key {
	case 18:
		return protocol.NewRequest(h, &kmsg.ApiVersionsRequest{Version: h.Version}), nil
	case 1:
		if len(body) < 12 {
			return nil, fmt.Errorf("short body")
		}
		return protocol.NewRequest(h, &kmsg.FetchRequest{Version: h.Version, SessionEpoch: int32(binary.BigEndian.Uint64(body)), MaxBytes: int32(binary.BigEndian.Uint32(body[8:]))}), nil
	}
	return nil, fmt.Errorf("key %d not served", h.Key)
}

func (h rangeHandler) Serve(r *protocol.Request) {
	f, ok := r.Msg.(*kmsg.FetchRequest)
	if !ok {
		r.Respond(&kmsg.ApiVersionsResponse{})
		return
	}
	go func() {
		fr, err := h.log.ReadRange(int64(f.SessionEpoch), int(f.MaxBytes), false)
		if err != nil || fr == nil {
			panic(fmt.Sprintf("range: %v", err))
		}
		if h.taken != nil {
			h.taken <- struct{}{}
			<-h.gate
		}
		head := binary.BigEndian.AppendUint32(nil, uint32(4+fr.Len()))
		head = binary.BigEndian.AppendUint32(head, uint32(r.CorrelationID))
		r.RespondParts([]protocol.Part{{Bytes: head}, {File: fr}})
	}()
}

// rangeFrame asks rangeHandler for the batches from offset, up to max bytes.
func rangeFrame(corr int32, offset int64, max int) []byte {
	body := binary.BigEndian.AppendUint64(nil, uint64(offset))
	return requestFrame(1, 4, corr, binary.BigEndian.AppendUint32(body, uint32(max)))
}

// bigLog is a log of n batches of about size bytes each, segments of
// segBytes.
func bigLog(t testing.TB, n, size, segBytes int) *storage.Log {
	t.Helper()
	return bigLogIn(t, storage.NewFileCache(32), n, size, segBytes)
}

func bigLogIn(t testing.TB, fc *storage.FileCache, n, size, segBytes int) *storage.Log {
	t.Helper()
	l, err := storage.Open(t.TempDir(), storage.Options{SegmentBytes: int64(segBytes), Files: fc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for i := range n {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		b, err := recordbatch.Build(recordbatch.Header{FirstTimestamp: int64(i), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]recordbatch.Record{{Key: []byte(fmt.Sprint(i)), Value: v}})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// readFrame reads one response frame: its correlation id and the rest.
func readFrame(t *testing.T, r io.Reader) (int32, []byte) {
	t.Helper()
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(lb[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatalf("reading a frame of %d bytes: %v", len(b), err)
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:]
}

func mustRead(t *testing.T, l *storage.Log, offset int64, max int) []byte {
	t.Helper()
	b, err := l.Read(offset, max, false)
	if err != nil || len(b) == 0 {
		t.Fatalf("Read(%d): %d bytes, %v", offset, len(b), err)
	}
	return b
}

// Responses with file ranges pipelined with plain ones come back in
// request order with the stored bytes, sent with sendfile, and every
// response byte is given back.
func TestFileRangesInRequestOrder(t *testing.T) {
	l := bigLog(t, 200, 20<<10, 64<<20)
	addr, srv := startServerWith(t, Config{}, rangeHandler{log: l})
	c := dial(t, addr)
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	go func() {
		for i := range int32(100) {
			var f []byte
			if i%2 == 0 {
				f = rangeFrame(i, int64(i), 1+int(i)*7000)
			} else {
				f = apiVersionsFrame(i)
			}
			if _, err := c.Write(f); err != nil {
				return
			}
		}
	}()
	r := bufio.NewReader(c)
	for i := range int32(100) {
		corr, body := readFrame(t, r)
		if corr != i {
			t.Fatalf("response %d has correlation %d", i, corr)
		}
		if i%2 == 0 && !bytes.Equal(body, mustRead(t, l, int64(i), 1+int(i)*7000)) {
			t.Fatalf("response %d: %d bytes differ from the stored batches", i, len(body))
		}
	}
	if sent, _ := srv.FileBytes(); sent == 0 {
		t.Fatal("nothing went out with sendfile")
	}
	if !pollUntil(5*time.Second, func() bool { return budgetUse(srv, "response") == 0 }) {
		t.Fatalf("response budget holds %d bytes after everything was read", budgetUse(srv, "response"))
	}
}

// A range larger than the socket takes is sent in part with sendfile and
// the rest copied (EAGAIN mid-range); the client gets every byte, in
// order with the next response.
func TestFileRangeSocketFull(t *testing.T) {
	l := bigLog(t, 600, 40<<10, 64<<20)
	addr, srv := startServerWith(t, Config{}, rangeHandler{log: l})
	c := dial(t, addr)
	_ = c.(*net.TCPConn).SetReadBuffer(16 << 10)
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(append(rangeFrame(1, 0, 20<<20), apiVersionsFrame(2)...)); err != nil {
		t.Fatal(err)
	}
	if !pollUntil(10*time.Second, func() bool { _, copied := srv.FileBytes(); return copied > 0 }) {
		t.Fatal("the socket took the whole range at once: EAGAIN not exercised")
	}
	r := bufio.NewReader(c)
	corr, body := readFrame(t, r)
	if corr != 1 || !bytes.Equal(body, mustRead(t, l, 0, 20<<20)) {
		t.Fatalf("correlation %d, %d bytes: not the stored batches", corr, len(body))
	}
	if corr, _ := readFrame(t, r); corr != 2 {
		t.Fatalf("next response has correlation %d", corr)
	}
	sent, copied := srv.FileBytes()
	t.Logf("sendfile %d bytes, copied %d", sent, copied)
	if sent == 0 {
		t.Fatal("nothing went out with sendfile")
	}
	if !pollUntil(5*time.Second, func() bool { return budgetUse(srv, "response") == 0 }) {
		t.Fatalf("response budget holds %d bytes after everything was read", budgetUse(srv, "response"))
	}
}

// A response holding a range of a segment that retention deletes before
// it is written still sends the stored bytes; one whose connection closed
// meanwhile is dropped; either way the deleted segment's descriptors close.
func TestFileRangeOfDeletedSegment(t *testing.T) {
	for _, closeFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("closed=%v", closeFirst), func(t *testing.T) {
			fc := storage.NewFileCache(32)
			l := bigLogIn(t, fc, 60, 20<<10, 256<<10)
			h := rangeHandler{log: l, taken: make(chan struct{}), gate: make(chan struct{})}
			addr, srv := startServerWith(t, Config{}, h)
			c := dial(t, addr)
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			want := mustRead(t, l, 0, 1<<20)
			if _, err := c.Write(rangeFrame(7, 0, 1<<20)); err != nil {
				t.Fatal(err)
			}
			<-h.taken
			files := fc.Open()
			if err := l.DeleteRecordsBefore(l.NextOffset() - 1); err != nil {
				t.Fatal(err)
			}
			if n, err := l.EnforceRetention(); err != nil || n == 0 {
				t.Fatalf("retention deleted %d segments: %v", n, err)
			}
			if closeFirst {
				c.Close()
				if !pollUntil(5*time.Second, func() bool { return srv.OpenConnections() == 0 }) {
					t.Fatal("connection not closed")
				}
			}
			close(h.gate)
			if !closeFirst {
				corr, body := readFrame(t, c)
				if corr != 7 || !bytes.Equal(body, want) {
					t.Fatalf("correlation %d, %d bytes: not the deleted segment's batches", corr, len(body))
				}
			}
			if !pollUntil(5*time.Second, func() bool { return fc.Open() < files }) {
				t.Fatalf("descriptors open: %d while the range was held, %d after", files, fc.Open())
			}
			if !pollUntil(5*time.Second, func() bool { return budgetUse(srv, "response") == 0 }) {
				t.Fatalf("response budget holds %d bytes", budgetUse(srv, "response"))
			}
		})
	}
}

// TLS connections cannot sendfile: the same responses are read into
// memory and written through TLS.
func TestFileRangeOverTLS(t *testing.T) {
	l := bigLog(t, 100, 20<<10, 64<<20)
	f := newTLSFixture(t)
	addr, srv := startServerWith(t, Config{TLS: f.store(t, certs.ClientAuthNone).ServerConfig()}, rangeHandler{log: l})
	c := dialTLS(t, addr, clientConfig(t, f.ca.CertFile, tlstest.Pair{}))
	for i := range int32(5) {
		if _, err := c.Write(rangeFrame(i, int64(i*10), 1<<20)); err != nil {
			t.Fatal(err)
		}
		corr, body := readFrame(t, c)
		if corr != i || !bytes.Equal(body, mustRead(t, l, int64(i*10), 1<<20)) {
			t.Fatalf("correlation %d, %d bytes: not the stored batches", corr, len(body))
		}
	}
	if sent, copied := srv.FileBytes(); sent != 0 || copied != 0 {
		t.Fatalf("TLS connection wrote file ranges itself: %d sent, %d copied", sent, copied)
	}
}

// copyHandler is rangeHandler's copying twin, as fetches were served
// before file ranges: the batches read into a buffer, then copied into
// the response frame.
type copyHandler struct{ rangeHandler }

func (h copyHandler) Serve(r *protocol.Request) {
	f, ok := r.Msg.(*kmsg.FetchRequest)
	if !ok {
		r.Respond(&kmsg.ApiVersionsResponse{})
		return
	}
	go func() {
		b, err := h.log.Read(int64(f.SessionEpoch), int(f.MaxBytes), false)
		if err != nil {
			panic(err)
		}
		frame := make([]byte, 8, 8+len(b))
		binary.BigEndian.PutUint32(frame, uint32(4+len(b)))
		binary.BigEndian.PutUint32(frame[4:], uint32(r.CorrelationID))
		r.RespondParts([]protocol.Part{{Bytes: append(frame, b...)}})
	}()
}

// BenchmarkFetchWrite: 1 MiB fetch responses, 4 in flight on one
// connection, sent from file ranges or copied; the client reads them into
// one buffer. cpu-ns/MB is the process's CPU (server and client) per MiB.
func BenchmarkFetchWrite(b *testing.B) {
	l := bigLog(b, 64, 64<<10, 64<<20)
	for _, mode := range []string{"sendfile", "copy"} {
		b.Run(mode, func(b *testing.B) {
			var h Handler = rangeHandler{log: l}
			if mode == "copy" {
				h = copyHandler{rangeHandler{log: l}}
			}
			addr, srv := startBenchServer(b, Config{}, h)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			const size, inFlight = 1 << 20, 4
			buf := make([]byte, 2*size)
			var lb [4]byte
			r := bufio.NewReaderSize(c, 64<<10)
			send := func(i int) {
				if _, err := c.Write(rangeFrame(int32(i), int64(i%32), size)); err != nil {
					b.Fatal(err)
				}
			}
			for i := range min(inFlight, b.N) {
				send(i)
			}
			cpu0 := processCPU()
			b.SetBytes(size)
			b.ResetTimer()
			for i := range b.N {
				if _, err := io.ReadFull(r, lb[:]); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(r, buf[:binary.BigEndian.Uint32(lb[:])]); err != nil {
					b.Fatal(err)
				}
				if i+inFlight < b.N {
					send(i + inFlight)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/MB")
			if sent, copied := srv.FileBytes(); sent+copied > 0 {
				b.ReportMetric(100*float64(copied)/float64(sent+copied), "%copied")
			}
		})
	}
}

// processCPU is the process's user and system CPU time, in nanoseconds.
func processCPU() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
