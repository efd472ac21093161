package netio

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/regent-broker/regent/protocol"
	"github.com/regent-broker/regent/storage"
)

// Responses with file ranges (fetches; protocol.Part) are written on the
// connection's event loop, in the callback of the AsyncWritev that writes
// the bytes before the first range, so nothing queued after them can come
// between their parts. A range goes to the socket with sendfile(2) while
// gnet's outbound buffer is empty (bytes queued there must leave first);
// what the socket does not take at once (EAGAIN), and ranges that meet a
// non-empty outbound buffer, are read with pread and written through gnet,
// which buffers them like any response. Either way every part is in the
// socket or in gnet's buffer when the callback returns, so the ranges are
// released there: nothing keeps a descriptor past the callback.
//
// sendfile reads the page cache on the loop: fetches read what was just
// written, which is cached; a cold range costs the loop a disk read, as
// it costs Kafka's network threads.

// fileStats counts how file ranges' bytes left: by sendfile, or copied.
type fileStats struct {
	sent, copied atomic.Int64
}

// FileBytes reports the bytes of file ranges sent with sendfile and those
// copied through memory (socket full, or bytes queued ahead), since start.
func (s *Server) FileBytes() (sent, copied int64) {
	return s.files.sent.Load(), s.files.copied.Load()
}

// copyChunk is the pread buffer of the copying path; gnet copies what it
// cannot send at once into its outbound buffer, so one buffer is reused.
const copyChunk = 256 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyChunk); return &b }}

// errSendFailed marks a response cut short mid-range: its length prefix is
// on the wire, so the connection cannot carry anything more.
var errSendFailed = errors.New("response cut short")

// gnetClosed is a write error after which gnet has closed the connection
// (and its descriptor: its number may already name another file).
type gnetClosed struct{ err error }

func (e gnetClosed) Error() string { return e.err.Error() }
func (e gnetClosed) Unwrap() error { return e.err }

// writeParts writes parts in order on c. On the event loop. An error
// means the connection is closed or being closed.
func (cs *connState) writeParts(c gnet.Conn, parts []protocol.Part) error {
	var bs [][]byte
	for i := 0; i < len(parts); i++ {
		if parts[i].File == nil {
			bs = append(bs[:0], parts[i].Bytes)
			for i+1 < len(parts) && parts[i+1].File == nil {
				i++
				bs = append(bs, parts[i].Bytes)
			}
			if _, err := c.Writev(bs); err != nil {
				return gnetClosed{err}
			}
			continue
		}
		if err := cs.sendRange(c, parts[i].File); err != nil {
			if !errors.As(err, new(gnetClosed)) {
				cs.abort(c, err)
			}
			return err
		}
	}
	return nil
}

// sendRange writes one file range on c. On the event loop.
func (cs *connState) sendRange(c gnet.Conn, fr *storage.FileRange) error {
	size, sent := fr.Len(), 0
	if c.OutboundBuffered() == 0 {
		off := fr.Offset()
		for sent < size {
			n, err := unix.Sendfile(c.Fd(), fr.Fd(), &off, size-sent)
			if n > 0 {
				sent += n
			}
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.EAGAIN) {
				break
			}
			if err != nil {
				cs.srv.files.sent.Add(int64(sent))
				return fmt.Errorf("sendfile: %w", err)
			}
			if n == 0 {
				cs.srv.files.sent.Add(int64(sent))
				return fmt.Errorf("sendfile at %d of %d bytes: %w", sent, size, io.ErrUnexpectedEOF)
			}
		}
		cs.srv.files.sent.Add(int64(sent))
	}
	if sent == size {
		return nil
	}
	return cs.srv.copyRange(fr, sent, func(b []byte) error {
		if _, err := c.Write(b); err != nil {
			return gnetClosed{err}
		}
		return nil
	})
}

// sendfileConn writes fr to a socket served by goroutines (a handed-off
// connection) with sendfile(2), waiting on the runtime's poller while the
// socket is full, within the connection's write deadline. It returns the
// bytes sent, counted in FileBytes.
func (s *Server) sendfileConn(rc syscall.RawConn, fr *storage.FileRange) (int, error) {
	size, sent := fr.Len(), 0
	off := fr.Offset()
	var serr error
	err := rc.Write(func(fd uintptr) bool {
		for sent < size {
			n, err := unix.Sendfile(int(fd), fr.Fd(), &off, size-sent)
			if n > 0 {
				sent += n
			}
			switch {
			case errors.Is(err, unix.EINTR):
			case errors.Is(err, unix.EAGAIN):
				return false // wait until writable
			case err != nil:
				serr = fmt.Errorf("sendfile: %w", err)
				return true
			case n == 0:
				serr = fmt.Errorf("sendfile at %d of %d bytes: %w", sent, size, io.ErrUnexpectedEOF)
				return true
			}
		}
		return true
	})
	s.files.sent.Add(int64(sent))
	if serr != nil {
		return sent, serr
	}
	return sent, err
}

// errRangeRead marks a file range that could not be read while copied.
var errRangeRead = errors.New("reading a file range")

// copyRange reads fr from byte from on, a pooled buffer at a time, and
// hands each piece to write, counting the bytes copied. A read failure
// wraps errRangeRead; a write failure is write's error.
func (s *Server) copyRange(fr *storage.FileRange, from int, write func([]byte) error) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	size := fr.Len()
	for sent := from; sent < size; {
		k := min(size-sent, len(buf))
		if _, err := fr.ReadAt(buf[:k], int64(sent)); err != nil {
			return fmt.Errorf("%w at %d of %d bytes: %w", errRangeRead, sent, size, err)
		}
		if err := write(buf[:k]); err != nil {
			return err
		}
		sent += k
		s.files.copied.Add(int64(k))
	}
	return nil
}

// abort closes a connection whose response was cut short: the socket is
// shut down at once, so that no later response's bytes follow the
// truncated one, and gnet closes it. On the event loop.
func (cs *connState) abort(c gnet.Conn, err error) {
	if !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
		cs.srv.log.Warn("closing connection: response cut short", "err", fmt.Errorf("%w: %w", errSendFailed, err), "remote", cs.info.RemoteAddr)
	}
	_ = unix.Shutdown(c.Fd(), unix.SHUT_RDWR)
	cs.close(closeSendFailed)
}
