package recordbatch

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Record is one decoded record. Key and Value may alias the batch (or the
// decompression buffer); copy them before mutating the batch bytes.
// KeyNull/ValueNull distinguish a null field (length -1) from an empty one;
// a null value is a tombstone on compacted topics.
type Record struct {
	OffsetDelta    int32
	TimestampDelta int64
	Key            []byte
	Value          []byte
	KeyNull        bool
	ValueNull      bool
	Headers        []RecordHeader
}

// RecordHeader is one record header. A nil Value encodes as null (-1); a
// non-nil empty Value encodes as zero length. Decoding mirrors that.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Records decodes every record of one whole batch, validating the batch first
// and decompressing as needed. Offset deltas must be strictly increasing and
// within [0, LastOffsetDelta], and the count must match NumRecords.
func Records(b []byte) ([]Record, error) {
	h, err := Validate(b)
	if err != nil {
		return nil, err
	}
	payload := b[HeaderSize:]
	if c := h.Compression(); c != CodecNone {
		payload, err = decompress(c, payload)
		if err != nil {
			return nil, fmt.Errorf("decompressing batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	recs, err := decodeRecords(payload, h)
	if err != nil {
		return nil, fmt.Errorf("decoding batch at offset %d: %w", h.BaseOffset, err)
	}
	return recs, nil
}

func decodeRecords(p []byte, h Header) ([]Record, error) {
	// Every record needs minRecordSize bytes, so the count is bounded by the
	// payload: this keeps a lying NumRecords from forcing a huge allocation.
	if int64(h.NumRecords)*minRecordSize > int64(len(p)) {
		return nil, fmt.Errorf("%w: %d records in %d bytes", ErrCorrupt, h.NumRecords, len(p))
	}
	recs := make([]Record, 0, h.NumRecords)
	d := decoder{b: p}
	prevDelta := int32(-1)
	for i := int32(0); i < h.NumRecords; i++ {
		r, err := d.record()
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		if r.OffsetDelta <= prevDelta || r.OffsetDelta > h.LastOffsetDelta {
			return nil, fmt.Errorf("%w: record %d has offset delta %d (previous %d, last %d)",
				ErrCorrupt, i, r.OffsetDelta, prevDelta, h.LastOffsetDelta)
		}
		prevDelta = r.OffsetDelta
		recs = append(recs, r)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after %d records", ErrCorrupt, len(d.b), h.NumRecords)
	}
	return recs, nil
}

// decoder consumes a record payload front to back; any short read or
// out-of-range varint is ErrCorrupt.
type decoder struct{ b []byte }

// varlong decodes a zig-zag varint. A record's fields are nearly always one
// or two bytes long (deltas, and lengths under 8 KiB), and every produced
// record is decoded once to validate it: those two lengths decode here
// without a call, the rest through binary.Varint (which accepts the same
// encodings, non-minimal ones included).
func (d *decoder) varlong() (int64, error) {
	var ux uint64
	switch b := d.b; {
	case len(b) >= 1 && b[0] < 0x80:
		ux, d.b = uint64(b[0]), b[1:]
	case len(b) >= 2 && b[1] < 0x80:
		ux, d.b = uint64(b[0]&0x7f)|uint64(b[1])<<7, b[2:]
	default:
		return d.varlongLong()
	}
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x, nil
}

// varlongLong is varlong for three bytes and more, and for errors.
func (d *decoder) varlongLong() (int64, error) {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		return 0, fmt.Errorf("%w: bad varint", ErrCorrupt)
	}
	d.b = d.b[n:]
	return v, nil
}

func (d *decoder) varint() (int32, error) {
	v, err := d.varlong()
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("%w: varint %d overflows int32", ErrCorrupt, v)
	}
	return int32(v), nil
}

// bytes reads a length-prefixed field; null reports length -1.
func (d *decoder) bytes() (b []byte, null bool, err error) {
	n, err := d.varint()
	if err != nil {
		return nil, false, err
	}
	if n < 0 {
		if n != -1 {
			return nil, false, fmt.Errorf("%w: length %d", ErrCorrupt, n)
		}
		return nil, true, nil
	}
	if int(n) > len(d.b) {
		return nil, false, fmt.Errorf("%w: field of %d bytes, %d left", ErrCorrupt, n, len(d.b))
	}
	b, d.b = d.b[:n:n], d.b[n:]
	return b, false, nil
}

func (d *decoder) record() (Record, error) {
	var r Record
	length, err := d.varint()
	if err != nil {
		return r, err
	}
	if length < 0 || int(length) > len(d.b) {
		return r, fmt.Errorf("%w: record length %d, %d left", ErrCorrupt, length, len(d.b))
	}
	// Decode within exactly the declared length so a record cannot bleed
	// into the next one.
	outer := d.b[length:]
	d.b = d.b[:length]
	if len(d.b) < 1 {
		return r, fmt.Errorf("%w: empty record", ErrCorrupt)
	}
	d.b = d.b[1:] // attributes: unused in v2
	if r.TimestampDelta, err = d.varlong(); err != nil {
		return r, err
	}
	if r.OffsetDelta, err = d.varint(); err != nil {
		return r, err
	}
	if r.Key, r.KeyNull, err = d.bytes(); err != nil {
		return r, err
	}
	if r.Value, r.ValueNull, err = d.bytes(); err != nil {
		return r, err
	}
	nh, err := d.varint()
	if err != nil {
		return r, err
	}
	// Each header takes at least two bytes; bound before allocating.
	if nh < 0 || int(nh)*2 > len(d.b) {
		return r, fmt.Errorf("%w: %d headers in %d bytes", ErrCorrupt, nh, len(d.b))
	}
	if nh > 0 {
		r.Headers = make([]RecordHeader, nh)
		for i := range r.Headers {
			k, null, err := d.bytes()
			if err != nil {
				return r, err
			}
			if null {
				return r, fmt.Errorf("%w: null header key", ErrCorrupt)
			}
			v, _, err := d.bytes()
			if err != nil {
				return r, err
			}
			r.Headers[i] = RecordHeader{Key: string(k), Value: v}
		}
	}
	if len(d.b) != 0 {
		return r, fmt.Errorf("%w: %d bytes left inside record", ErrCorrupt, len(d.b))
	}
	d.b = outer
	return r, nil
}

// appendBytes appends a length-prefixed field, -1 for null.
func appendBytes(dst, b []byte, null bool) []byte {
	if null {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63) // zig-zag
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func fieldLen(b []byte, null bool) int {
	if null {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

// bodyLen is the encoded size of r after its length prefix.
func bodyLen(r *Record) int {
	n := 1 + varintLen(r.TimestampDelta) + varintLen(int64(r.OffsetDelta)) +
		fieldLen(r.Key, r.KeyNull) + fieldLen(r.Value, r.ValueNull) +
		varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + fieldLen(h.Value, h.Value == nil)
	}
	return n
}

// AppendRecord appends the wire encoding of r (length-prefixed) to dst.
func AppendRecord(dst []byte, r *Record) []byte {
	dst = binary.AppendVarint(dst, int64(bodyLen(r)))
	dst = append(dst, 0) // attributes
	dst = binary.AppendVarint(dst, r.TimestampDelta)
	dst = binary.AppendVarint(dst, int64(r.OffsetDelta))
	dst = appendBytes(dst, r.Key, r.KeyNull)
	dst = appendBytes(dst, r.Value, r.ValueNull)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendBytes(dst, h.Value, h.Value == nil)
	}
	return dst
}
