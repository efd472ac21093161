package recordbatch

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
)

// ErrInvalidRecord marks a batch whose header and CRC are intact but whose
// contents break the format's rules: a record count that does not match the
// records present or the offset range, malformed records, a compressed
// section that does not decompress or decompresses past its bound. Kafka
// answers these with INVALID_RECORD, which clients do not retry (a
// CORRUPT_MESSAGE, for a CRC mismatch, is retried: it may be damage in
// transit, while these bytes will be the same on every retry).
var ErrInvalidRecord = errors.New("recordbatch: invalid record")

// RecordError names the record at fault within its batch (KIP-467's
// batch_index), for errors that concern one record rather than the batch.
type RecordError struct {
	Index int32
	Err   error
}

func (e *RecordError) Error() string { return fmt.Sprintf("record %d: %v", e.Index, e.Err) }
func (e *RecordError) Unwrap() error { return e.Err }

// IterOptions bound and shape one pass over a batch's records.
type IterOptions struct {
	// MaxBytes bounds the records section after decompression (bytes of
	// records, whether or not compressed); 0 means MaxDecompressedSize.
	// Going past it is ErrTooLarge: it bounds the CPU one batch can cost.
	MaxBytes int64
	// SkipKeyValues reads past keys, values and headers without keeping
	// them: Key, Value and Headers are nil (KeyNull and ValueNull are still
	// set). Memory then stays constant whatever the records' sizes.
	SkipKeyValues bool
	// SkipValues is SkipKeyValues for values and headers only: keys are
	// kept (as for mapping a compacted log's keys).
	SkipValues bool
}

func (o IterOptions) maxBytes() int64 {
	if o.MaxBytes <= 0 || o.MaxBytes > MaxDecompressedSize {
		return MaxDecompressedSize
	}
	return o.MaxBytes
}

// DecompressLimit is the bound on a batch's decompressed records that a
// topic with the given max.message.bytes accepts: 32 times the compressed
// limit (clients batch to well under that ratio; a bomb needs far more),
// at least 16 MiB and at most MaxDecompressedSize.
func DecompressLimit(maxMessageBytes int32) int64 {
	return min(max(32*int64(maxMessageBytes), 16<<20), MaxDecompressedSize)
}

// Each decodes the records of b, one whole batch that passed Validate (or
// Split), calling fn for each in order. Compressed records are decompressed
// as they are decoded, through a small buffer, so the whole decompressed
// section is never held in memory. Key, Value and Headers alias a buffer
// that is reused for the next record: copy what must outlive fn.
//
// Each checks the records against the header: exactly NumRecords records,
// offset deltas strictly increasing within [0, LastOffsetDelta], nothing
// after the last record. It stops at the first error; fn's error is
// returned unwrapped, every other error wraps ErrInvalidRecord.
func Each(b []byte, opt IterOptions, fn func(i int32, r *Record) error) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	if h.TotalSize() != len(b) {
		return fmt.Errorf("%w: header says %d bytes, have %d", ErrBadLength, h.TotalSize(), len(b))
	}
	limit := opt.maxBytes()
	payload := b[HeaderSize:]
	var src source
	if c := h.Compression(); c == CodecNone {
		if int64(len(payload)) > limit {
			return fmt.Errorf("%w: %w: %d bytes of records, limit %d", ErrInvalidRecord, ErrTooLarge, len(payload), limit)
		}
		src = &sliceSource{b: payload}
	} else {
		r, release, err := openDecompressor(c, payload, limit)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
		}
		defer release()
		s := newStreamSource(r, limit)
		defer s.release()
		src = s
	}
	if err := eachRecord(src, h, opt, fn); err != nil {
		var fnErr fnError
		if errors.As(err, &fnErr) {
			return fnErr.err
		}
		if errors.Is(err, ErrTooLarge) {
			return fmt.Errorf("%w: records decompress past %d bytes: %w", ErrInvalidRecord, limit, ErrTooLarge)
		}
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	return nil
}

// fnError carries the callback's own error through eachRecord untouched.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

func eachRecord(src source, h Header, opt IterOptions, fn func(int32, *Record) error) error {
	if s, ok := src.(*sliceSource); ok {
		return eachInPlace(s, h, fn)
	}
	d := recDecoder{src: src, skipKey: opt.SkipKeyValues, skip: opt.SkipKeyValues || opt.SkipValues}
	prev := int32(-1)
	var r Record
	for i := int32(0); i < h.NumRecords; i++ {
		if err := d.record(&r); err != nil {
			var se *streamError
			if errors.As(err, &se) {
				return se
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("batch claims %d records, ends after %d", h.NumRecords, i)
			}
			return &RecordError{Index: i, Err: err}
		}
		if r.OffsetDelta <= prev || r.OffsetDelta > h.LastOffsetDelta {
			return &RecordError{Index: i, Err: fmt.Errorf("offset delta %d (previous %d, last %d)", r.OffsetDelta, prev, h.LastOffsetDelta)}
		}
		prev = r.OffsetDelta
		if err := fn(i, &r); err != nil {
			return fnError{err}
		}
	}
	// Reading to the end also makes gzip check its trailer.
	if err := src.atEnd(); err != nil {
		return fmt.Errorf("after %d records: %w", h.NumRecords, err)
	}
	return nil
}

// eachInPlace is eachRecord for an uncompressed section: records decode in
// place (aliasing the batch, so skipping would save nothing), several times
// faster than through the byte-at-a-time source.
func eachInPlace(s *sliceSource, h Header, fn func(int32, *Record) error) error {
	d := decoder{b: s.b}
	prev := int32(-1)
	var r Record
	for i := int32(0); i < h.NumRecords; i++ {
		if len(d.b) == 0 {
			return fmt.Errorf("batch claims %d records, ends after %d", h.NumRecords, i)
		}
		var err error
		if r, err = d.record(); err != nil {
			return &RecordError{Index: i, Err: err}
		}
		if r.OffsetDelta <= prev || r.OffsetDelta > h.LastOffsetDelta {
			return &RecordError{Index: i, Err: fmt.Errorf("offset delta %d (previous %d, last %d)", r.OffsetDelta, prev, h.LastOffsetDelta)}
		}
		prev = r.OffsetDelta
		if err := fn(i, &r); err != nil {
			return fnError{err}
		}
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%d bytes after the last record", len(d.b))
	}
	return nil
}

// source yields a records section's bytes, from a slice or a decompressor.
type source interface {
	io.ByteReader
	// take returns the next n bytes; they stay valid until reset.
	take(n int) ([]byte, error)
	discard(n int) error
	// reset starts a new record: earlier takes may be overwritten.
	reset()
	// atEnd reports an error unless the section is exhausted.
	atEnd() error
	// varint reads a zig-zag varint, reporting how many bytes it took.
	varint() (v int64, n int, err error)
}

// sliceSource reads an uncompressed section in place: takes alias it.
type sliceSource struct{ b []byte }

func (s *sliceSource) ReadByte() (byte, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c, nil
}

func (s *sliceSource) take(n int) ([]byte, error) {
	if n > len(s.b) {
		return nil, io.ErrUnexpectedEOF
	}
	out := s.b[:n:n]
	s.b = s.b[n:]
	return out, nil
}

func (s *sliceSource) discard(n int) error {
	_, err := s.take(n)
	return err
}

func (s *sliceSource) reset() {}

func (s *sliceSource) varint() (int64, int, error) {
	v, n := binary.Varint(s.b)
	if n <= 0 {
		if n == 0 {
			return 0, 0, io.ErrUnexpectedEOF
		}
		return 0, 0, errors.New("varint overflows 64 bits")
	}
	s.b = s.b[n:]
	return v, n, nil
}

func (s *sliceSource) atEnd() error {
	if len(s.b) != 0 {
		return fmt.Errorf("%d bytes after the last record", len(s.b))
	}
	return nil
}

// streamChunk is how much a take grows its buffer per read: a record that
// claims a huge length costs memory only as its bytes actually arrive.
const streamChunk = 64 << 10

var bufReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// streamSource reads a decompressor through a pooled bufio.Reader. Takes
// are copied into arena, which is reused from record to record.
type streamSource struct {
	br    *bufio.Reader
	arena []byte
}

func newStreamSource(r io.Reader, limit int64) *streamSource {
	br := bufReaders.Get().(*bufio.Reader)
	br.Reset(&boundedReader{r: r, left: limit + 1})
	return &streamSource{br: br}
}

func (s *streamSource) release() {
	s.br.Reset(nil)
	bufReaders.Put(s.br)
	s.br = nil
}

func (s *streamSource) ReadByte() (byte, error) {
	c, err := s.br.ReadByte()
	return c, streamErr(err)
}

// streamError is a failure of the decompressor (or its bound), as opposed
// to a malformed record: it is reported for the batch, not a record.
type streamError struct{ err error }

func (e *streamError) Error() string { return "decompressing: " + e.err.Error() }
func (e *streamError) Unwrap() error { return e.err }

func streamErr(err error) error {
	if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF {
		return err
	}
	return &streamError{err}
}

func (s *streamSource) take(n int) ([]byte, error) {
	start := len(s.arena)
	for len(s.arena)-start < n {
		want := min(n-(len(s.arena)-start), streamChunk)
		at := len(s.arena)
		if at+want > cap(s.arena) {
			// Earlier takes keep pointing at the old array, still valid.
			na := make([]byte, at, max(at+want, 2*cap(s.arena)))
			copy(na, s.arena)
			s.arena = na
		}
		s.arena = s.arena[:at+want]
		if _, err := io.ReadFull(s.br, s.arena[at:]); err != nil {
			s.arena = s.arena[:at]
			return nil, streamErr(unexpected(err))
		}
	}
	return s.arena[start : start+n : start+n], nil
}

func (s *streamSource) discard(n int) error {
	_, err := s.br.Discard(n)
	return streamErr(unexpected(err))
}

func (s *streamSource) reset() { s.arena = s.arena[:0] }

// varint decodes from bufio's buffer in place when it holds the whole
// varint (nearly always), instead of a call per byte.
func (s *streamSource) varint() (int64, int, error) {
	b, err := s.br.Peek(binary.MaxVarintLen64) // fewer only near the end
	if err != nil && err != io.EOF {
		return 0, 0, streamErr(err) // bufio reports an error once: keep it
	}
	if v, n := binary.Varint(b); n > 0 {
		_, _ = s.br.Discard(n)
		return v, n, nil
	} else if n < 0 {
		return 0, 0, errors.New("varint overflows 64 bits")
	}
	// The varint runs past what is left: read it byte by byte for the
	// error (EOF or the decompressor's).
	c := &countingByteReader{r: s}
	v, err := binary.ReadVarint(c)
	return v, c.n, err
}

type countingByteReader struct {
	r io.ByteReader
	n int
}

func (c *countingByteReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

func (s *streamSource) atEnd() error {
	if _, err := s.br.ReadByte(); err != io.EOF {
		if err != nil {
			return streamErr(err)
		}
		return errors.New("bytes after the last record")
	}
	return nil
}

// unexpected turns a bare EOF inside a record into ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// boundedReader fails with ErrTooLarge once more than left-1 bytes came out.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left <= 0 {
		return n, ErrTooLarge
	}
	return n, err
}

// recDecoder decodes one record at a time from src, keeping count of the
// bytes left in the record's declared length so that no record can read
// into the next.
type recDecoder struct {
	src     source
	skipKey bool // keys are read past, not kept
	skip    bool // values and headers are read past, not kept
	left    int64
}

func (d *recDecoder) ReadByte() (byte, error) {
	if d.left <= 0 {
		return 0, errors.New("record overruns its length")
	}
	c, err := d.src.ReadByte()
	if err != nil {
		return 0, unexpected(err)
	}
	d.left--
	return c, nil
}

// varlong reads a varint within the record's length.
func (d *recDecoder) varlong() (int64, error) {
	v, n, err := d.src.varint()
	if err != nil {
		return 0, fmt.Errorf("bad varint: %w", unexpected(err))
	}
	if int64(n) > d.left {
		return 0, errors.New("record overruns its length")
	}
	d.left -= int64(n)
	return v, nil
}

func (d *recDecoder) varint() (int32, error) {
	v, err := d.varlong()
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("varint %d overflows int32", v)
	}
	return int32(v), nil
}

// field reads a length-prefixed field (-1: null), keeping it unless skip.
func (d *recDecoder) field(skip bool) (b []byte, null bool, err error) {
	n, err := d.varint()
	if err != nil {
		return nil, false, err
	}
	if n < 0 {
		if n != -1 {
			return nil, false, fmt.Errorf("field length %d", n)
		}
		return nil, true, nil
	}
	if int64(n) > d.left {
		return nil, false, fmt.Errorf("field of %d bytes, %d left in record", n, d.left)
	}
	d.left -= int64(n)
	if skip {
		return nil, false, d.src.discard(int(n))
	}
	b, err = d.src.take(int(n))
	return b, false, err
}

func (d *recDecoder) record(r *Record) error {
	*r = Record{}
	d.src.reset()
	d.left = math.MaxInt64
	length, _, err := d.src.varint()
	if err != nil {
		return unexpected(err)
	}
	if length <= 0 || length > math.MaxInt32 {
		return fmt.Errorf("record length %d", length)
	}
	d.left = length
	if _, err := d.ReadByte(); err != nil { // attributes: unused in v2
		return err
	}
	ts, err := d.varlong()
	if err != nil {
		return fmt.Errorf("timestamp delta: %w", err)
	}
	r.TimestampDelta = ts
	if r.OffsetDelta, err = d.varint(); err != nil {
		return err
	}
	if r.Key, r.KeyNull, err = d.field(d.skipKey); err != nil {
		return err
	}
	if r.Value, r.ValueNull, err = d.field(d.skip); err != nil {
		return err
	}
	nh, err := d.varint()
	if err != nil {
		return err
	}
	// Each header takes at least two bytes; bound before allocating.
	if nh < 0 || int64(nh)*2 > d.left {
		return fmt.Errorf("%d headers in %d bytes", nh, d.left)
	}
	if nh > 0 && !d.skip {
		r.Headers = make([]RecordHeader, nh)
	}
	for i := int32(0); i < nh; i++ {
		k, null, err := d.field(d.skip)
		if err != nil {
			return err
		}
		if null {
			return errors.New("null header key")
		}
		v, _, err := d.field(d.skip)
		if err != nil {
			return err
		}
		if !d.skip {
			r.Headers[i] = RecordHeader{Key: string(k), Value: v}
		}
	}
	if d.left != 0 {
		return fmt.Errorf("%d bytes left inside record", d.left)
	}
	return nil
}

// ProduceOptions are a topic's limits on an arriving batch.
type ProduceOptions struct {
	// MaxDecompressedBytes bounds the records section after
	// decompression; 0 means MaxDecompressedSize. See DecompressLimit.
	MaxDecompressedBytes int64
	// RequireKeys refuses records without a key (compacted topics).
	RequireKeys bool
	// CheckTimestamps refuses records whose timestamp lies outside
	// [MinTimestamp, MaxTimestamp] (message.timestamp.before.max.ms and
	// after.max.ms on a CreateTime topic). A record without a timestamp
	// (-1) is not refused, as in Kafka.
	CheckTimestamps            bool
	MinTimestamp, MaxTimestamp int64
}

// RecordErrors are the records of one batch that a topic refuses one by
// one (KIP-467): a record without a key on a compacted topic, a timestamp
// out of range. Kafka refuses the whole batch and names each of them, so
// that a client can tell which records were at fault.
type RecordErrors struct {
	Records []RecordError // by index
	// Timestamp is set when one of them is a timestamp out of range:
	// Kafka's error code is then INVALID_TIMESTAMP, else INVALID_RECORD.
	Timestamp bool
}

// ErrKeyRequired is a record without a key on a compacted topic.
var ErrKeyRequired = errors.New("a compacted topic cannot accept a record without a key")

func (e *RecordErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d records refused", len(e.Records))
	for i, r := range e.Records[:min(len(e.Records), 3)] {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(r.Error())
	}
	if len(e.Records) > 3 {
		b.WriteString("; ...")
	}
	return b.String()
}

func (e *RecordErrors) Unwrap() error { return ErrInvalidRecord }

// ValidateProduce applies to b, one batch of a Produce request that passed
// Split, the rules Kafka applies to arriving batches beyond those of a
// stored batch: at least one record, exactly one record per offset slot
// (lastOffsetDelta == count-1, so the deltas are 0..count-1), and every
// record present and well formed, decompressing as it goes within
// opt.MaxDecompressedBytes and without holding the decompressed records;
// then the topic's rules on each record (opt). Every error wraps
// ErrInvalidRecord; a malformed record is a *RecordError, records the
// topic refuses one by one are a *RecordErrors naming every one of them
// (a malformed record found after some is reported instead).
func ValidateProduce(b []byte, opt ProduceOptions) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	if err := h.CheckProduce(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	var refused *RecordErrors
	refuse := func(i int32, err error, ts bool) {
		if refused == nil {
			refused = &RecordErrors{}
		}
		refused.Records = append(refused.Records, RecordError{Index: i, Err: err})
		refused.Timestamp = refused.Timestamp || ts
	}
	// Skipping keys and values keeps the pass at constant memory; a
	// skipped key still reports whether it is null.
	err = Each(b, IterOptions{MaxBytes: opt.MaxDecompressedBytes, SkipKeyValues: true}, func(i int32, r *Record) error {
		if opt.RequireKeys && r.KeyNull {
			refuse(i, ErrKeyRequired, false)
		}
		if opt.CheckTimestamps {
			if ts := h.FirstTimestamp + r.TimestampDelta; ts != -1 && (ts < opt.MinTimestamp || ts > opt.MaxTimestamp) {
				refuse(i, fmt.Errorf("timestamp %d is out of range: the topic accepts [%d, %d]", ts, opt.MinTimestamp, opt.MaxTimestamp), true)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if refused != nil {
		return refused
	}
	return nil
}
