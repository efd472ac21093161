package recordbatch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// MaxDecompressedSize caps the decompressed size of one batch so a small
// hostile batch cannot make the broker allocate without bound.
const MaxDecompressedSize = 256 << 20

// xerial framing, as written by the Java client's snappy-java
// SnappyOutputStream: an 8-byte magic, version and compatible-version int32s,
// then blocks each prefixed by a big-endian int32 compressed length.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderLen = 16
	// xerialBlockSize matches snappy-java's default block size.
	xerialBlockSize = 32 << 10
)

var (
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	gzipReaders sync.Pool // *gzip.Reader; needs a valid stream to construct

	lz4Writers = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		// Kafka's Java LZ4 stream uses 64 KiB blocks; the library default
		// (4 MiB) would allocate far more per writer for no gain.
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb))
		return w
	}}
	lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}

	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
	zstdDec  *zstd.Decoder
	zstdErr  error
)

// zstdCodecs lazily builds the shared zstd encoder and decoder; both are safe
// for concurrent EncodeAll/DecodeAll.
func zstdCodecs() (*zstd.Encoder, *zstd.Decoder, error) {
	zstdOnce.Do(func() {
		zstdEnc, zstdErr = zstd.NewWriter(nil, zstd.WithZeroFrames(true))
		if zstdErr != nil {
			return
		}
		zstdDec, zstdErr = zstd.NewReader(nil,
			zstd.WithDecoderMaxMemory(MaxDecompressedSize),
			zstd.WithDecoderConcurrency(0))
	})
	return zstdEnc, zstdDec, zstdErr
}

// Compress compresses raw (an encoded records section) with codec. For
// CodecNone raw is returned unchanged. Snappy output is xerial-framed, the
// framing Java consumers expect from the broker.
func Compress(codec int8, raw []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return raw, nil
	case CodecGzip:
		var buf bytes.Buffer
		w := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(w)
		w.Reset(&buf)
		if _, err := w.Write(raw); err != nil {
			return nil, fmt.Errorf("gzip compress: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("gzip compress: %w", err)
		}
		return buf.Bytes(), nil
	case CodecSnappy:
		return appendXerial(nil, raw), nil
	case CodecLz4:
		var buf bytes.Buffer
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		w.Reset(&buf)
		if _, err := w.Write(raw); err != nil {
			return nil, fmt.Errorf("lz4 compress: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("lz4 compress: %w", err)
		}
		return buf.Bytes(), nil
	case CodecZstd:
		enc, _, err := zstdCodecs()
		if err != nil {
			return nil, fmt.Errorf("zstd init: %w", err)
		}
		return enc.EncodeAll(raw, nil), nil
	default:
		return nil, fmt.Errorf("%w: %d", ErrBadCodec, codec)
	}
}

func appendXerial(dst, raw []byte) []byte {
	dst = append(dst, xerialMagic...)
	dst = binary.BigEndian.AppendUint32(dst, 1) // version
	dst = binary.BigEndian.AppendUint32(dst, 1) // minimum compatible version
	for len(raw) > 0 {
		n := min(len(raw), xerialBlockSize)
		// Encode straight into dst after a 4-byte length placeholder.
		at := len(dst)
		dst = growTo(dst, at+4+s2.MaxEncodedLen(n))
		enc := s2.EncodeSnappy(dst[at+4:], raw[:n])
		binary.BigEndian.PutUint32(dst[at:], uint32(len(enc)))
		dst = dst[:at+4+len(enc)]
		raw = raw[n:]
	}
	return dst
}

// decompress inflates a compressed records section, bounded by
// MaxDecompressedSize.
func decompress(codec int8, p []byte) ([]byte, error) {
	switch codec {
	case CodecGzip:
		r, _ := gzipReaders.Get().(*gzip.Reader)
		var err error
		if r == nil {
			r, err = gzip.NewReader(bytes.NewReader(p))
		} else {
			err = r.Reset(bytes.NewReader(p))
		}
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		defer gzipReaders.Put(r)
		return readBounded(r, len(p))
	case CodecSnappy:
		return unsnappy(p)
	case CodecLz4:
		r := lz4Readers.Get().(*lz4.Reader)
		defer lz4Readers.Put(r)
		r.Reset(bytes.NewReader(p))
		return readBounded(r, len(p))
	case CodecZstd:
		_, dec, err := zstdCodecs()
		if err != nil {
			return nil, fmt.Errorf("zstd init: %w", err)
		}
		// DecodeAll preallocates what the frame header claims; refuse
		// claims the input cannot possibly hold, so a tiny batch cannot
		// make the broker allocate hundreds of MiB.
		var zh zstd.Header
		if zh.Decode(p) == nil && zh.HasFCS && zh.FrameContentSize > maxZstdOutput(len(p)) {
			return nil, fmt.Errorf("%w: zstd frame claims %d bytes from %d", ErrCorrupt, zh.FrameContentSize, len(p))
		}
		out, err := dec.DecodeAll(p, nil)
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%w: %d", ErrBadCodec, codec)
	}
}

// zstdStreamWindow bounds the window a streamed zstd frame may declare, and
// so the history its decoder keeps: level 19 (Kafka's compression.zstd.level
// allows up to 22) uses 8 MiB; larger windows only pay on inputs far bigger
// than a batch.
const zstdStreamWindow = 32 << 20

// zstdStreams pools single-goroutine streaming decoders: creating one costs
// more than decoding a typical batch.
var zstdStreams = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1), // synchronous: no goroutines per stream
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(zstdStreamWindow),
		zstd.WithDecoderMaxMemory(MaxDecompressedSize))
	if err != nil {
		return err
	}
	return d
}}

// openDecompressor returns a reader of the decompressed records section p
// and a func that gives pooled state back (call it once done reading). It
// reads p as it is asked for bytes, holding at most a codec block or window,
// never the whole output. limit is the caller's bound on the output; it
// lets the few codecs that must decode a whole block at once refuse early.
func openDecompressor(codec int8, p []byte, limit int64) (io.Reader, func(), error) {
	switch codec {
	case CodecGzip:
		r, _ := gzipReaders.Get().(*gzip.Reader)
		var err error
		if r == nil {
			r, err = gzip.NewReader(bytes.NewReader(p))
		} else {
			err = r.Reset(bytes.NewReader(p))
		}
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		return r, func() { gzipReaders.Put(r) }, nil
	case CodecSnappy:
		if len(p) < xerialHeaderLen || !bytes.HasPrefix(p, xerialMagic) {
			// A raw snappy block decodes only whole.
			out, err := snappyBlockLimited(nil, p, limit)
			if err != nil {
				return nil, nil, err
			}
			return bytes.NewReader(out), func() {}, nil
		}
		x := xerialReaders.Get().(*xerialReader)
		x.rest, x.cur, x.limit, x.err = p[xerialHeaderLen:], nil, limit, nil
		return x, func() {
			x.rest, x.cur = nil, nil
			if cap(x.buf) <= 4*xerialBlockSize { // keep only the usual size
				xerialReaders.Put(x)
			}
		}, nil
	case CodecLz4:
		r := lz4Readers.Get().(*lz4.Reader)
		r.Reset(bytes.NewReader(p))
		return r, func() { r.Reset(nil); lz4Readers.Put(r) }, nil
	case CodecZstd:
		var zh zstd.Header
		if zh.Decode(p) == nil && zh.HasFCS && zh.FrameContentSize > maxZstdOutput(len(p)) {
			return nil, nil, fmt.Errorf("%w: zstd frame claims %d bytes from %d", ErrCorrupt, zh.FrameContentSize, len(p))
		}
		got := zstdStreams.Get()
		d, ok := got.(*zstd.Decoder)
		if !ok {
			return nil, nil, fmt.Errorf("zstd init: %v", got)
		}
		if err := d.Reset(bytes.NewReader(p)); err != nil {
			zstdStreams.Put(d)
			return nil, nil, fmt.Errorf("zstd: %w", err)
		}
		return d, func() { _ = d.Reset(nil); zstdStreams.Put(d) }, nil
	default:
		return nil, nil, fmt.Errorf("%w: %d", ErrBadCodec, codec)
	}
}

var xerialReaders = sync.Pool{New: func() any { return new(xerialReader) }}

// xerialReader streams xerial-framed snappy one block (32 KiB as written by
// snappy-java) at a time.
type xerialReader struct {
	rest  []byte
	cur   []byte // decoded, unread part of the current block
	buf   []byte // reused block buffer
	limit int64
	err   error
}

func (x *xerialReader) Read(p []byte) (n int, err error) {
	if x.err != nil {
		return 0, x.err
	}
	defer func() {
		if err != nil && err != io.EOF {
			x.err = err // sticky: the stream cannot resume after a bad block
		}
	}()
	for len(x.cur) == 0 {
		if len(x.rest) == 0 {
			return 0, io.EOF
		}
		if len(x.rest) < 4 {
			return 0, fmt.Errorf("%w: xerial block length truncated", ErrCorrupt)
		}
		n := binary.BigEndian.Uint32(x.rest)
		x.rest = x.rest[4:]
		if uint64(n) > uint64(len(x.rest)) {
			return 0, fmt.Errorf("%w: xerial block of %d bytes, %d left", ErrCorrupt, n, len(x.rest))
		}
		out, err := snappyBlockLimited(x.buf[:0], x.rest[:n], x.limit)
		if err != nil {
			return 0, err
		}
		x.rest = x.rest[n:]
		x.buf, x.cur = out, out
	}
	n = copy(p, x.cur)
	x.cur = x.cur[n:]
	return n, nil
}

// maxZstdOutput is a hard bound from the zstd format: every block needs at
// least a 3-byte header and one byte of content and yields at most 128 KiB.
func maxZstdOutput(n int) uint64 { return uint64(n)/4*(128<<10) + 128<<10 }

// maxSnappyOutput is the same for snappy: the densest element, a 3-byte
// copy, yields 64 bytes.
func maxSnappyOutput(n int) int { return 22*n + 64 }

// readBounded reads r to EOF, failing past MaxDecompressedSize.
func readBounded(r io.Reader, hint int) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, min(4*hint, MaxDecompressedSize)))
	n, err := buf.ReadFrom(io.LimitReader(r, MaxDecompressedSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if n > MaxDecompressedSize {
		return nil, ErrTooLarge
	}
	return buf.Bytes(), nil
}

// unsnappy accepts both xerial-framed snappy (Java clients, and this
// package's Compress) and a single raw snappy block (librdkafka, older Go
// clients).
func unsnappy(p []byte) ([]byte, error) {
	if len(p) < xerialHeaderLen || !bytes.HasPrefix(p, xerialMagic) {
		return snappyBlock(nil, p)
	}
	var out []byte
	var err error
	for rest := p[xerialHeaderLen:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: xerial block length truncated", ErrCorrupt)
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, fmt.Errorf("%w: xerial block of %d bytes, %d left", ErrCorrupt, n, len(rest))
		}
		if out, err = snappyBlock(out, rest[:n]); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	return out, nil
}

// snappyBlock appends the decoding of one raw snappy block to dst.
func snappyBlock(dst, block []byte) ([]byte, error) {
	return snappyBlockLimited(dst, block, MaxDecompressedSize)
}

// snappyBlockLimited is snappyBlock refusing output past limit bytes in all.
func snappyBlockLimited(dst, block []byte, limit int64) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %w", ErrCorrupt, err)
	}
	if n > maxSnappyOutput(len(block)) {
		return nil, fmt.Errorf("%w: snappy block claims %d bytes from %d", ErrCorrupt, n, len(block))
	}
	if int64(len(dst)+n) > limit {
		return nil, fmt.Errorf("%w: snappy block of %d bytes, limit %d", ErrTooLarge, n, limit)
	}
	dst = growTo(dst, len(dst)+n)
	if _, err := s2.Decode(dst[len(dst)-n:], block); err != nil {
		return nil, fmt.Errorf("%w: snappy: %w", ErrCorrupt, err)
	}
	return dst, nil
}

// growTo extends b to length n, reallocating if needed.
func growTo(b []byte, n int) []byte {
	if n <= cap(b) {
		return b[:n]
	}
	nb := make([]byte, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}
