package netio

import (
	"errors"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// readBufferBytes is what gnet reads from a socket into its loop's buffer at
// once. Small on purpose: a large frame's first bytes come through that
// buffer and are copied out of it, the rest is read straight from the socket
// into the frame's own buffer (readSocket), so a produce request's records
// are copied once in user space, not twice.
const readBufferBytes = 16 << 10

// socketConn is a transport whose socket the loop may read itself: a gnet
// connection. TLS connections decrypt in their own reader instead.
type socketConn interface{ Fd() int }

// socketBuffered is how many bytes the connection's socket holds that gnet
// has not read (0 for other transports, or when the kernel does not say).
// Those bytes have arrived as surely as gnet's, so they count the same for
// the request budget. On the loop, only while gnet holds none of the
// connection's input.
func (cs *connState) socketBuffered() int {
	sc, ok := cs.edge().(socketConn)
	if !ok {
		return 0
	}
	return socketInQueue(sc.Fd())
}

// readSocket reads into p straight from the socket, which socketBuffered
// said holds at least len(p) bytes. gnet's poller is level-triggered, so
// what is left in the socket is reported again. It returns false when the
// read failed (the connection must close).
func (cs *connState) readSocket(p []byte) (int, bool) {
	sc, ok := cs.edge().(socketConn)
	if !ok {
		return 0, false
	}
	n, err := unix.Read(sc.Fd(), p)
	switch {
	case n > 0:
		return n, true
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
		return 0, true
	default:
		// n == 0 without an error is the peer's end of stream.
		return 0, false
	}
}

// fill moves what has arrived of the frame being read into its buffer,
// growing it as needed: first what gnet read, then what the socket holds.
// sock is what socketBuffered said when the frame began (-1: not asked), so
// a frame that has all arrived costs one ioctl, not two. It returns
// gnet.None when the frame is whole or nothing more has arrived, else the
// action that closes the connection. On the loop, frameMu held.
func (cs *connState) fill(sock int) gnet.Action {
	s, c := cs.srv, cs.edge()
	for len(cs.partial) < cs.want {
		n := min(c.InboundBuffered(), cs.want-len(cs.partial))
		direct := false
		if n == 0 {
			if sock < 0 {
				sock = cs.socketBuffered()
			}
			if n = min(sock, cs.want-len(cs.partial)); n == 0 {
				return gnet.None
			}
			sock = -1 // what is left is asked again
			direct = true
		}
		if need := len(cs.partial) + n; need > cap(cs.partial) {
			grown := growFrame(cap(cs.partial), need, cs.want, s.frameRoom(need+4))
			more := int64(grown - cap(cs.partial))
			if !s.reserve(cs, more) {
				// The rest waits, unread, until answers give bytes
				// back (the frame's FrameTimeout still runs).
				if s.waitForBudget(cs, c) {
					return gnet.None
				}
				s.log.Warn("closing connection: request memory budget spent", "size", cs.want, "read", len(cs.partial), "remote", cs.info.RemoteAddr)
				return cs.refuse(closeRequestBudget)
			}
			cs.paused.Store(false) // no longer waiting for the budget, if it was
			cs.reqHeld.Add(more)
			// The old buffer is garbage once copied; its charge
			// carries over to the new one.
			b := cs.frameBuf(grown, cs.want, frameKey(cs.partial))[:len(cs.partial)]
			copy(b, cs.partial)
			cs.partial = b
		}
		into := cs.partial[len(cs.partial) : len(cs.partial)+n]
		if direct {
			got, ok := cs.readSocket(into)
			if !ok {
				return gnet.Close
			}
			if got == 0 {
				return gnet.None
			}
			n = got
			s.socketBytes.Add(int64(got))
		} else if _, err := c.Read(into); err != nil {
			return gnet.Close
		}
		cs.partial = cs.partial[:len(cs.partial)+n]
	}
	return gnet.None
}
