package recordlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Layout is how a frame's body holds the key and the value. Both layouts
// share the envelope
//
//	length u32 (of what follows: crc + body) | crc32c u32 (of the body) | body
//
// and differ only in the body, because the two stores that predate this
// package wrote different bodies and their files (and the raft entries
// that carry their frames verbatim) must stay readable as they are.
type Layout uint8

const (
	// LayoutKV is the body
	//
	//	keyLen u32 | key | valueLen i32 (-1: tombstone) | value
	//
	// which can tell an empty value from a tombstone. The group
	// coordinator's groups.log uses it; new stores should too.
	LayoutKV Layout = iota
	// LayoutKey16 is the body
	//
	//	keyLen u16 | key | value (to the end of the body)
	//
	// where an empty value is a tombstone and keys are at most 65535
	// bytes. The transaction coordinator's txn.log uses it.
	LayoutKey16
)

// frameHeader is the envelope's length and crc.
const frameHeader = 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors ReadFrame returns. ErrShortFrame means the bytes end inside the
// frame (a write that was cut); the others mean the bytes are damaged.
var (
	ErrShortFrame = errors.New("recordlog: frame runs past the end of the data")
	ErrBadLength  = errors.New("recordlog: frame length out of range")
	ErrBadCRC     = errors.New("recordlog: frame checksum mismatch")
	ErrBadBody    = errors.New("recordlog: malformed frame body")
)

// Record is one framed record as stored. Key and Value alias Frame;
// nothing in this package modifies a Frame once it is built, so holders
// may keep them.
type Record struct {
	Key []byte
	// Value is nil for a tombstone; a LayoutKV record may have an empty,
	// non-nil value.
	Value     []byte
	Tombstone bool
	// Frame is the whole frame: envelope and body.
	Frame []byte
}

func (ly Layout) String() string {
	switch ly {
	case LayoutKV:
		return "kv"
	case LayoutKey16:
		return "key16"
	}
	return fmt.Sprintf("layout(%d)", uint8(ly))
}

// minLength is the smallest valid length field: crc plus an empty body.
func (ly Layout) minLength() uint32 {
	if ly == LayoutKey16 {
		return 4 + 2
	}
	return 4 + 8
}

// checkKey reports whether key can be framed in ly.
func (ly Layout) checkKey(key []byte) error {
	if ly == LayoutKey16 && len(key) > math.MaxUint16 {
		return fmt.Errorf("recordlog: key of %d bytes in layout %s", len(key), ly)
	}
	if ly == LayoutKV && uint64(len(key)) > math.MaxInt32 {
		return fmt.Errorf("recordlog: key of %d bytes", len(key))
	}
	return nil
}

// AppendFrame appends the frame of key and value to dst (tombstone: a
// frame that deletes key; value is then ignored). In LayoutKey16 an empty
// value is a tombstone whatever tombstone says. The key must fit the
// layout (checkKey); callers outside the package check with CheckKey.
func (ly Layout) AppendFrame(dst, key, value []byte, tombstone bool) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	switch ly {
	case LayoutKey16:
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(key)))
		dst = append(dst, key...)
		if !tombstone {
			dst = append(dst, value...)
		}
	default:
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(key)))
		dst = append(dst, key...)
		if tombstone {
			dst = binary.BigEndian.AppendUint32(dst, math.MaxUint32) // -1
		} else {
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(value)))
			dst = append(dst, value...)
		}
	}
	body := dst[start+frameHeader:]
	binary.BigEndian.PutUint32(dst[start:], uint32(4+len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
	return dst
}

// CheckKey reports whether key can be framed in ly.
func (ly Layout) CheckKey(key []byte) error { return ly.checkKey(key) }

// ReadFrame reads the frame at the start of b, whose length field may be
// at most maxLength (0: DefaultMaxFrameBytes), returning the record
// (aliasing b) and the frame's size.
func (ly Layout) ReadFrame(b []byte, maxLength int) (Record, int, error) {
	if maxLength <= 0 {
		maxLength = DefaultMaxFrameBytes
	}
	if len(b) < frameHeader {
		return Record{}, 0, ErrShortFrame
	}
	n := binary.BigEndian.Uint32(b)
	if n < ly.minLength() || uint64(n) > uint64(maxLength) {
		return Record{}, 0, fmt.Errorf("%w: %d", ErrBadLength, n)
	}
	end := 4 + int(n)
	if end > len(b) {
		return Record{}, 0, ErrShortFrame
	}
	body := b[frameHeader:end]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return Record{}, 0, ErrBadCRC
	}
	key, value, tomb, err := ly.ParseBody(body)
	if err != nil {
		return Record{}, 0, err
	}
	return Record{Key: key, Value: value, Tombstone: tomb, Frame: b[:end:end]}, end, nil
}

// ParseBody splits a frame body (what follows the envelope) into key and
// value; a tombstone has a nil value.
func (ly Layout) ParseBody(body []byte) (key, value []byte, tombstone bool, err error) {
	switch ly {
	case LayoutKey16:
		if len(body) < 2 {
			return nil, nil, false, ErrBadBody
		}
		kl := int(binary.BigEndian.Uint16(body))
		if 2+kl > len(body) {
			return nil, nil, false, ErrBadBody
		}
		key, value = body[2:2+kl:2+kl], body[2+kl:]
		if len(value) == 0 {
			return key, nil, true, nil
		}
		return key, value, false, nil
	default:
		if len(body) < 8 {
			return nil, nil, false, ErrBadBody
		}
		kl := uint64(binary.BigEndian.Uint32(body))
		if kl > uint64(len(body)-8) {
			return nil, nil, false, ErrBadBody
		}
		key = body[4 : 4+kl : 4+kl]
		rest := body[4+kl:]
		vl := int32(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if vl < 0 {
			// -1 is what is written; any negative length has always
			// been read as a tombstone.
			if len(rest) != 0 {
				return nil, nil, false, ErrBadBody
			}
			return key, nil, true, nil
		}
		if int(vl) != len(rest) {
			return nil, nil, false, ErrBadBody
		}
		return key, rest, false, nil
	}
}
