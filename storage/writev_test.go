package storage

import (
	"bytes"
	"testing"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// AppendPatchedAt writes the patched head and the batch's records, sets
// the base offset in the head, and leaves the batch's own bytes alone.
func TestAppendPatchedAtLeavesBatchUntouched(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	mustAppend(t, l, simpleBatch(t, 3, 10, 1000)) // offsets 0-2

	b := simpleBatch(t, 4, 100, 2000)
	orig := bytes.Clone(b)
	head := bytes.Clone(b[:recordbatch.HeaderSize])
	recordbatch.SetPartitionLeaderEpoch(head, 7)
	base, last, err := l.AppendPatchedAt(head, b, 2000)
	if err != nil {
		t.Fatalf("AppendPatchedAt: %v", err)
	}
	if base != 3 || last != 6 {
		t.Fatalf("appended at [%d, %d], want [3, 6]", base, last)
	}
	if !bytes.Equal(b, orig) {
		t.Fatal("AppendPatchedAt wrote to the batch")
	}
	data, err := l.Read(3, 1<<20, false)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	got, err := recordbatch.Split(data)
	if err != nil || len(got) != 1 {
		t.Fatalf("read back %d batches, err %v", len(got), err)
	}
	h, _ := recordbatch.ParseHeader(got[0])
	if h.BaseOffset != 3 || h.PartitionLeaderEpoch != 7 {
		t.Fatalf("stored header base %d epoch %d, want 3 and 7", h.BaseOffset, h.PartitionLeaderEpoch)
	}
	if !bytes.Equal(got[0][recordbatch.HeaderSize:], orig[recordbatch.HeaderSize:]) {
		t.Fatal("stored records differ from the batch's")
	}
	if _, _, err := l.AppendPatchedAt(head[:10], b, 2000); err == nil {
		t.Fatal("a short head was taken")
	}
	if recs := readAll(t, l, 0); len(recs) != 7 {
		t.Fatalf("read %d records, want 7", len(recs))
	}
}

// A run of more batches than one pwritev takes (IOV_MAX buffers) is
// written whole and in order.
func TestAppendManyAtMoreBatchesThanIovecs(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	const n = 2500
	batches := make([][]byte, n)
	for i := range batches {
		batches[i] = batch(t, recordbatch.CodecNone, rec{key: "k", value: string(rune('a' + i%26)), ts: 1000})
	}
	firsts, err := l.AppendManyAt(batches, 1000)
	if err != nil || len(firsts) != n {
		t.Fatalf("AppendManyAt: %d of %d, err %v", len(firsts), n, err)
	}
	recs := readAll(t, l, 0)
	if len(recs) != n {
		t.Fatalf("read %d records, want %d", len(recs), n)
	}
	for i, r := range recs {
		if r.off != int64(i) || r.value != string(rune('a'+i%26)) {
			t.Fatalf("record %d: offset %d value %q", i, r.off, r.value)
		}
	}
}
