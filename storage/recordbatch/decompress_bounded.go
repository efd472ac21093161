package recordbatch

import (
	"bytes"
	"fmt"
	"io"
)

// DecompressBounded inflates p, compressed with codec (Kafka's ids, 0 for
// none: p itself is returned), refusing output past limit bytes with an
// error wrapping ErrTooLarge. For payloads that are not record batches but
// use the same codecs, as KIP-714's pushed client metrics.
func DecompressBounded(codec int8, p []byte, limit int64) ([]byte, error) {
	if codec == 0 {
		if int64(len(p)) > limit {
			return nil, ErrTooLarge
		}
		return p, nil
	}
	r, release, err := openDecompressor(codec, p, limit)
	if err != nil {
		return nil, err
	}
	defer release()
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if n > limit {
		return nil, ErrTooLarge
	}
	return buf.Bytes(), nil
}
