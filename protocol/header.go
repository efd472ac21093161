package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Header is a parsed request header (v1 or v2; v0 carried no client id and
// no current client sends it).
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
}

// ErrMalformed marks a request that cannot be parsed. The connection that
// sent it is closed; nothing else is affected.
var ErrMalformed = errors.New("malformed request")

// ErrUnknownKey marks a request for an API key this broker does not know.
var ErrUnknownKey = errors.New("unknown api key")

// ParseHeader reads the request header from one frame body (the bytes after
// the 4-byte length). It returns the header and the request body that
// follows it. It never panics on hostile input.
func ParseHeader(frame []byte) (Header, []byte, error) {
	var h Header
	if len(frame) < 10 {
		return h, nil, fmt.Errorf("%w: header needs 10 bytes, have %d", ErrMalformed, len(frame))
	}
	h.Key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	// The client id is a nullable non-compact string even in flexible
	// headers (a wart of the v2 header kept for compatibility).
	n := int16(binary.BigEndian.Uint16(frame[8:]))
	rest := frame[10:]
	if n > 0 {
		if int(n) > len(rest) {
			return h, nil, fmt.Errorf("%w: client id length %d past end", ErrMalformed, n)
		}
		h.ClientID = string(rest[:n])
		rest = rest[n:]
	} else if n < -1 {
		return h, nil, fmt.Errorf("%w: client id length %d", ErrMalformed, n)
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, rest, fmt.Errorf("%w: %d", ErrUnknownKey, h.Key)
	}
	req.SetVersion(h.Version)
	// ApiVersions must be answerable at any version (clients probe with
	// versions newer than ours), so its flexibility is judged by kmsg's rule
	// only when the version is one kmsg knows.
	if h.Version >= 0 && req.IsFlexible() {
		var err error
		rest, err = skipTags(rest)
		if err != nil {
			return h, nil, err
		}
	}
	return h, rest, nil
}

// skipTags skips a tagged-field section: an unsigned varint count followed by
// (tag, size, bytes) triples.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, fmt.Errorf("%w: bad tag count", ErrMalformed)
	}
	b = b[n:]
	if count > uint64(len(b)) {
		return nil, fmt.Errorf("%w: tag count %d past end", ErrMalformed, count)
	}
	for i := uint64(0); i < count; i++ {
		_, n = binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("%w: bad tag id", ErrMalformed)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: bad tag size", ErrMalformed)
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// AppendResponseFrame encodes a whole response frame: length, correlation id,
// header tags when flexible (never for ApiVersions), body.
func AppendResponseFrame(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != 18 {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
