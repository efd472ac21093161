package protocol

import (
	"bytes"
	"testing"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// batchesHold answers for the offsets of whole batches in a read (two
// records each here, with a gap where compaction removed a batch) and not
// for offsets in the gap, past the read or in a trailing partial batch.
func TestBatchesHold(t *testing.T) {
	one := buildBatch(t, 0, []recordbatch.Record{{Value: []byte("a")}, {OffsetDelta: 1, Value: []byte("b")}})
	var read []byte
	for _, base := range []int64{10, 12, 16} { // 14 and 15 were cleaned
		b := bytes.Clone(one)
		recordbatch.SetBaseOffset(b, base)
		read = append(read, b...)
	}
	partial := append(bytes.Clone(read), one[:recordbatch.HeaderSize+2]...)
	recordbatch.SetBaseOffset(partial[len(read):], 18)
	has := batchesHold(partial)
	for off, want := range map[int64]bool{9: false, 10: true, 11: true, 13: true, 14: false, 15: false, 16: true, 17: true, 18: false, 30: false} {
		if got := has(off); got != want {
			t.Errorf("offset %d: held %v, want %v", off, got, want)
		}
	}
}
