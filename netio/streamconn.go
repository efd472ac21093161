package netio

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/regent-broker/regent/protocol"
)

// streamConn is a connection served by goroutines over the standard
// library's net.Conn, seen as an edgeConn: a TLS connection (tls.go), or a
// plaintext one handed off by the event loop because it kept sending while
// told to wait (handoff.go). A reader goroutine frames (the connection's
// "loop", under loopMu) and stops reading its socket while the connection
// is paused, so TCP pushes back and input never piles up past one read; a
// writer goroutine writes responses in order.
type streamConn struct {
	rw    io.ReadWriter // what is read and written: a tls.Conn, or raw itself
	raw   net.Conn      // the socket: deadlines, and closed to close (no close_notify: it could block)
	plain bool          // rw is raw: batches go out with writev, not coalesced into TLS records
	chunk int           // the most one read takes
	cs    *connState

	// ready is closed once the goroutines may touch the socket and the
	// connection's state: at once for TLS; for a handoff, once the event
	// loop has let go of both (handoff.go). The reader waits for it
	// whatever happens, so the connection's close runs after the event
	// loop's last pass over it.
	ready chan struct{}
	// onClose, when set, is called by Close (once): it closes the event
	// loop's side of a handoff that has not finished.
	onClose func()

	// loopMu is the connection's loop: the reader's framing, write
	// callbacks and the close run under it, one at a time, as gnet runs
	// them on one event loop.
	loopMu sync.Mutex
	// in[r:] is input read and not yet framed; owned by the loop.
	in []byte
	r  int

	wake      chan struct{} // a paused reader is asked to frame again
	closed    chan struct{} // closed by Close
	closeOnce sync.Once

	wnotify chan struct{} // the writer has jobs
	wmu     struct {
		sync.Mutex
		jobs []writeJob
		done bool // the writer is gone: writes fail
	}
}

// tlsReadChunk is the most one read takes from a TLS connection (a TLS
// record's plaintext is at most 16 KiB); plainReadChunk from a handed-off
// plaintext one.
const (
	tlsReadChunk   = 16 << 10
	plainReadChunk = 64 << 10
)

// tlsCoalesce is the size under which a batch of responses is copied into
// one buffer and written with one Write (one TLS record, one syscall).
const tlsCoalesce = 64 << 10

// newStreamConn makes a streamConn over rw and raw; ready is closed when it
// may start (nil: at once).
func newStreamConn(rw io.ReadWriter, raw net.Conn, chunk int, ready chan struct{}) *streamConn {
	if ready == nil {
		ready = make(chan struct{})
		close(ready)
	}
	t := &streamConn{rw: rw, raw: raw, plain: rw == io.ReadWriter(raw), chunk: chunk, ready: ready,
		wake: make(chan struct{}, 1), closed: make(chan struct{}), wnotify: make(chan struct{}, 1)}
	t.in = make([]byte, 0, chunk)
	return t
}

// writeJob is one write: its buffers, then its parts (bytes and file
// ranges), written in order, and the callback run on the loop once
// written or failed.
type writeJob struct {
	bufs  [][]byte
	parts []protocol.Part
	cb    gnet.AsyncCallback
}

// serve runs the connection until it closes: the writer on its own
// goroutine (counted in s.tls.wg), the reader on this one, then the
// connection's close.
func (t *streamConn) serve() {
	s := t.cs.srv
	s.tls.wg.Add(1)
	go func() {
		defer s.tls.wg.Done()
		t.writeLoop()
	}()
	<-t.ready
	t.readLoop()
	_ = t.Close()
	t.loopMu.Lock()
	s.closeConn(t.cs)
	t.loopMu.Unlock()
}

// readLoop frames what arrives until the connection closes or is refused.
func (t *streamConn) readLoop() {
	s := t.cs.srv
	for {
		select {
		case <-t.closed:
			return
		default:
		}
		t.loopMu.Lock()
		act := s.traffic(t.cs)
		paused := t.cs.paused.Load()
		t.loopMu.Unlock()
		if act != gnet.None {
			return
		}
		if paused {
			select {
			case <-t.wake:
				continue
			case <-t.closed:
				return
			}
		}
		// Not paused: everything whole was framed, what is left is the
		// start of a frame (in partial) or under 4 bytes (in t.in).
		if t.r > 0 {
			left := t.in[t.r:]
			if cap(t.in) > t.chunk && len(left) <= t.chunk {
				// Input carried over at a handoff: back to one chunk.
				t.in = make([]byte, 0, t.chunk)
			}
			t.in = t.in[:copy(t.in[:cap(t.in)], left)]
			t.r = 0
		}
		n, err := t.rw.Read(t.in[len(t.in):cap(t.in)])
		t.in = t.in[:len(t.in)+n]
		if err != nil && n == 0 {
			return
		}
	}
}

func (t *streamConn) InboundBuffered() int { return len(t.in) - t.r }

func (t *streamConn) Peek(n int) ([]byte, error) {
	if t.InboundBuffered() < n {
		return nil, errors.New("netio: short peek")
	}
	return t.in[t.r : t.r+n], nil
}

func (t *streamConn) Discard(n int) (int, error) {
	n = min(n, t.InboundBuffered())
	t.r += n
	return n, nil
}

func (t *streamConn) Read(p []byte) (int, error) {
	n := copy(p, t.in[t.r:])
	t.r += n
	if t.r == len(t.in) {
		t.in, t.r = t.in[:0], 0
	}
	return n, nil
}

// OutboundBuffered is 0: bytes are counted until Write returns, not past.
func (t *streamConn) OutboundBuffered() int { return 0 }

// Wake asks a paused reader to frame again. cb must be nil.
func (t *streamConn) Wake(gnet.AsyncCallback) error {
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return nil
}

// Close closes the socket; the reader then runs the connection's close.
// Any goroutine, any number of times.
func (t *streamConn) Close() error {
	t.closeOnce.Do(func() {
		close(t.closed)
		_ = t.raw.Close()
		if t.onClose != nil {
			t.onClose()
		}
	})
	return nil
}

// AsyncWritev queues bs for the writer; calls' writes happen in call
// order. cb runs on the loop once the bytes are written or failed.
func (t *streamConn) AsyncWritev(bs [][]byte, cb gnet.AsyncCallback) error {
	return t.asyncWrite(bs, nil, cb)
}

// asyncWrite queues bs and then parts (file ranges are read and written
// by the writer), as AsyncWritev.
func (t *streamConn) asyncWrite(bs [][]byte, parts []protocol.Part, cb gnet.AsyncCallback) error {
	t.wmu.Lock()
	if t.wmu.done {
		t.wmu.Unlock()
		return net.ErrClosed
	}
	t.wmu.jobs = append(t.wmu.jobs, writeJob{bufs: bs, parts: parts, cb: cb})
	t.wmu.Unlock()
	select {
	case t.wnotify <- struct{}{}:
	default:
	}
	return nil
}

// writeLoop writes queued responses in order, each Write bounded by
// WriteTimeout; after a failure or close, the rest fail with their
// callbacks. Its own goroutine; writes nothing before ready.
func (t *streamConn) writeLoop() {
	s := t.cs.srv
	var (
		jobs    []writeJob
		scratch []byte
		failed  error
	)
	select {
	case <-t.ready:
	case <-t.closed:
	}
	for {
		stopping := false
		select {
		case <-t.wnotify:
		case <-t.closed:
			stopping = true
		}
		t.wmu.Lock()
		jobs, t.wmu.jobs = t.wmu.jobs, jobs[:0]
		if stopping {
			t.wmu.done = true
		}
		t.wmu.Unlock()
		if stopping {
			// The callbacks touch the connection's state: not before the
			// event loop has let go of it.
			<-t.ready
		}
		for i := range jobs {
			j := &jobs[i]
			err := failed
			if stopping && err == nil {
				err = net.ErrClosed
			}
			if err == nil {
				scratch, err = t.write(j.bufs, scratch, s.cfg.WriteTimeout)
				if err == nil && j.parts != nil {
					err = t.writeParts(j.parts, s.cfg.WriteTimeout)
				}
				if err != nil {
					failed = err
					var ne net.Error
					switch {
					case errors.As(err, &ne) && ne.Timeout():
						s.log.Warn("closing connection: responses not read", "timeout", s.cfg.WriteTimeout, "remote", t.cs.info.RemoteAddr)
						t.cs.close(closeWriteStall)
					case errors.Is(err, errSendFailed):
						s.log.Warn("closing connection: response cut short", "err", err, "remote", t.cs.info.RemoteAddr)
						t.cs.close(closeSendFailed)
					default:
						_ = t.Close() // the peer went away: nothing to count
					}
				}
			}
			if j.cb != nil {
				t.loopMu.Lock()
				_ = j.cb(nil, err)
				t.loopMu.Unlock()
			}
			*j = writeJob{}
		}
		if stopping {
			return
		}
	}
}

// write writes bufs with a deadline of timeout per Write: on a plaintext
// socket with one writev; on TLS, coalescing small batches into scratch
// (returned for reuse).
func (t *streamConn) write(bufs [][]byte, scratch []byte, timeout time.Duration) ([]byte, error) {
	_ = t.raw.SetWriteDeadline(time.Now().Add(timeout))
	if t.plain {
		nb := net.Buffers(bufs)
		_, err := nb.WriteTo(t.raw)
		return scratch, err
	}
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if len(bufs) > 1 && total <= tlsCoalesce {
		scratch = scratch[:0]
		for _, b := range bufs {
			scratch = append(scratch, b...)
		}
		_, err := t.rw.Write(scratch)
		return scratch, err
	}
	for _, b := range bufs {
		if _, err := t.rw.Write(b); err != nil {
			return scratch, err
		}
		_ = t.raw.SetWriteDeadline(time.Now().Add(timeout))
	}
	return scratch, nil
}

// writeParts writes parts in order: bytes as they are, file ranges (a
// handed-off connection's fetch responses) with sendfile(2) on a
// plaintext socket, else read into a buffer and written.
func (t *streamConn) writeParts(parts []protocol.Part, timeout time.Duration) error {
	for _, p := range parts {
		_ = t.raw.SetWriteDeadline(time.Now().Add(timeout))
		if p.File == nil {
			if _, err := t.rw.Write(p.Bytes); err != nil {
				return err
			}
			continue
		}
		from := 0
		if sc, ok := t.raw.(syscall.Conn); ok && t.plain {
			if rc, err := sc.SyscallConn(); err == nil {
				sent, err := t.cs.srv.sendfileConn(rc, p.File)
				switch {
				case err == nil:
					continue
				case sent > 0:
					// The response's length is on the wire: nothing
					// more can follow it.
					return fmt.Errorf("%w: %w", errSendFailed, err)
				}
				// Nothing sent (a file sendfile refuses, or a dead
				// socket the copy finds dead too): copy it.
				from = sent
			}
		}
		err := t.cs.srv.copyRange(p.File, from, func(b []byte) error {
			_, err := t.rw.Write(b)
			_ = t.raw.SetWriteDeadline(time.Now().Add(timeout))
			return err
		})
		if errors.Is(err, errRangeRead) {
			// The response's length is on the wire: nothing more can
			// follow it.
			return fmt.Errorf("%w: %w", errSendFailed, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
