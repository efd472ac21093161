package hostile

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// clientID names every raw request, so the broker's logs show whose it is.
const clientID = "hostile"

var formatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))

// AppendRequest appends one size-prefixed request frame (header and body)
// to dst.
func AppendRequest(dst []byte, req kmsg.Request, corr int32) []byte {
	// The formatter writes the size at the start of the slice it is
	// given, so it gets an empty one.
	return append(dst, formatter.AppendRequest(nil, req, corr)...)
}

// ReadResponse reads one size-prefixed response frame and returns its
// correlation id and what follows it (the header's tags, if any, included).
// maxSize bounds the frame this side accepts.
func ReadResponse(r io.Reader, maxSize int) (corr int32, rest []byte, err error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return 0, nil, err
	}
	size := int(int32(binary.BigEndian.Uint32(lb[:])))
	if size < 4 || size > maxSize {
		return 0, nil, fmt.Errorf("response size %d out of bounds (4..%d)", size, maxSize)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

// DecodeResponse decodes a response body as returned by ReadResponse into
// resp, whose version must be set. Flexible responses carry header tags,
// except ApiVersions, whose response header is always v0.
func DecodeResponse(resp kmsg.Response, rest []byte) error {
	if resp.IsFlexible() && resp.Key() != 18 {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return err
		}
	}
	if err := resp.ReadFrom(rest); err != nil {
		return fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
	return nil
}

func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, fmt.Errorf("bad tag count")
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		_, k := binary.Uvarint(b) // tag key
		if k <= 0 {
			return nil, fmt.Errorf("bad tag key")
		}
		b = b[k:]
		l, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < l {
			return nil, fmt.Errorf("bad tag length")
		}
		b = b[k+int(l):]
	}
	return b, nil
}

// Dial connects with a bounded wait.
func Dial(addr string) (net.Conn, error) {
	return DialBy(addr, time.Now().Add(5*time.Second))
}

// DialBy connects, waiting at most 5 s and never past deadline: a broker
// whose accept queue is full must not hold an attack's setup for minutes.
func DialBy(addr string, deadline time.Time) (net.Conn, error) {
	wait := min(5*time.Second, time.Until(deadline))
	if wait <= 0 {
		return nil, fmt.Errorf("dial %s: deadline passed", addr)
	}
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return c, nil
}
