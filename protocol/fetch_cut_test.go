package protocol

import (
	"bytes"
	"testing"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// A read that went past the published high watermark is cut at the first
// batch starting there; batches below it, and a partial batch that starts
// below it, are kept.
func TestCutAtOffset(t *testing.T) {
	one := buildBatch(t, 0, []recordbatch.Record{{Value: []byte("a")}, {OffsetDelta: 1, Value: []byte("b")}})
	var log []byte
	for _, base := range []int64{0, 2, 4} {
		b := bytes.Clone(one)
		recordbatch.SetBaseOffset(b, base)
		log = append(log, b...)
	}
	n := len(one)
	for _, c := range []struct {
		name  string
		in    []byte
		limit int64
		want  int
	}{
		{"all below", log, 6, 3 * n},
		{"cut at a batch start", log, 4, 2 * n},
		{"limit inside a batch keeps it", log, 3, 2 * n},
		{"nothing below", log, 0, 0},
		{"partial batch below kept", log[:2*n+10], 6, 2*n + 10},
		{"partial batch at the limit cut", log[:2*n+recordbatch.HeaderSize], 4, 2 * n},
		{"shorter than a header kept", log[:n+5], 6, n + 5},
	} {
		if got := len(cutAtOffset(c.in, c.limit)); got != c.want {
			t.Errorf("%s: kept %d bytes, want %d", c.name, got, c.want)
		}
	}
}
