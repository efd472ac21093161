package protocol

import (
	"encoding/binary"
	"fmt"

	"github.com/regent-broker/regent/storage"
)

// Part is one piece of an encoded response frame: bytes, or (File set) a
// range of stored batches that the connection sends from the segment file
// (sendfile), never copying it through a buffer. A frame's parts are
// written in order; together they are the whole frame, length prefix
// first.
type Part struct {
	Bytes []byte
	File  *storage.FileRange
}

// Len is the part's size in bytes.
func (p Part) Len() int {
	if p.File != nil {
		return p.File.Len()
	}
	return len(p.Bytes)
}

// PartsLen is the size of a frame's parts.
func PartsLen(parts []Part) int {
	n := 0
	for _, p := range parts {
		n += p.Len()
	}
	return n
}

// ReleaseParts releases the file ranges of parts (a frame dropped, or
// written). Safe more than once.
func ReleaseParts(parts []Part) {
	for _, p := range parts {
		p.File.Release()
	}
}

// FlattenParts copies a frame's parts into one buffer (connections that
// cannot send files: TLS) and releases the file ranges.
func FlattenParts(parts []Part) ([]byte, error) {
	defer ReleaseParts(parts)
	out := make([]byte, 0, PartsLen(parts))
	for _, p := range parts {
		if p.File == nil {
			out = append(out, p.Bytes...)
			continue
		}
		var err error
		if out, err = p.File.AppendTo(out); err != nil {
			return nil, fmt.Errorf("reading stored batches for a response: %w", err)
		}
	}
	return out, nil
}

// SetReplyParts sets where a response made of parts goes (RespondParts);
// without it such responses are flattened and go to the SetReply
// function. The callee owns the parts' file ranges and must release them.
func (r *Request) SetReplyParts(reply func(parts []Part)) { r.replyParts = reply }

// RespondParts hands the connection a response frame made of parts (see
// Part). Safe from any goroutine; only the first response counts (the
// parts of a later one are released).
func (r *Request) RespondParts(parts []Part) {
	if !r.replied.CompareAndSwap(false, true) {
		ReleaseParts(parts)
		return
	}
	if r.trace != nil {
		r.trace.Responded(PartsLen(parts))
	}
	if r.replyParts != nil {
		r.replyParts(parts)
		return
	}
	frame, err := FlattenParts(parts)
	if err != nil {
		// The frame's length is promised; answer empty instead.
		resp := errorResponse(r, err)
		resp.SetVersion(r.Version)
		frame = AppendResponseFrame(nil, r.CorrelationID, resp)
	}
	r.reply(frame)
}

// frameBuf builds a frame's parts: bytes appended to buf, with file
// ranges placed between them.
type frameBuf struct {
	buf   []byte
	files []fileAt
}

// fileAt is a file range placed after buf[:at].
type fileAt struct {
	at int
	f  *storage.FileRange
}

func (b *frameBuf) int16(v int16) { b.buf = binary.BigEndian.AppendUint16(b.buf, uint16(v)) }
func (b *frameBuf) int32(v int32) { b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(v)) }
func (b *frameBuf) int64(v int64) { b.buf = binary.BigEndian.AppendUint64(b.buf, uint64(v)) }
func (b *frameBuf) uvarint(v int) { b.buf = binary.AppendUvarint(b.buf, uint64(v)) }
func (b *frameBuf) file(f *storage.FileRange) {
	b.files = append(b.files, fileAt{at: len(b.buf), f: f})
}

// arrayLen is an array's length: int32, or compact (n+1) when flexible;
// null is -1, or 0 when flexible.
func (b *frameBuf) arrayLen(n int, null, flexible bool) {
	switch {
	case flexible && null:
		b.uvarint(0)
	case flexible:
		b.uvarint(n + 1)
	case null:
		b.int32(-1)
	default:
		b.int32(int32(n))
	}
}

// bytesLen is a bytes field's length prefix (int32, or compact when
// flexible; null as arrayLen).
func (b *frameBuf) bytesLen(n int, null, flexible bool) { b.arrayLen(n, null, flexible) }

// string is a non-null string: int16 length, or compact when flexible.
func (b *frameBuf) string(s string, flexible bool) {
	if flexible {
		b.uvarint(len(s) + 1)
	} else {
		b.int16(int16(len(s)))
	}
	b.buf = append(b.buf, s...)
}

// parts finishes the frame: the length prefix (the first 4 bytes of buf,
// reserved by the caller) and the parts in order.
func (b *frameBuf) parts() []Part {
	size := len(b.buf)
	for _, f := range b.files {
		size += f.f.Len()
	}
	binary.BigEndian.PutUint32(b.buf, uint32(size-4))
	parts := make([]Part, 0, 2*len(b.files)+1)
	prev := 0
	for _, f := range b.files {
		if f.at > prev {
			parts = append(parts, Part{Bytes: b.buf[prev:f.at:f.at]})
		}
		parts = append(parts, Part{File: f.f})
		prev = f.at
	}
	if prev < len(b.buf) {
		parts = append(parts, Part{Bytes: b.buf[prev:]})
	}
	return parts
}
