package protocol

import (
	"bytes"
	"slices"
	"testing"

	"github.com/regent-broker/regent/actors/share"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// TestMergeShareAcquired: a second round on a partition that acquired
// records below the first round's, and the rest of a batch the first
// round sent part of, answers each batch once, in offset order, and its
// ranges sorted (CI saw franz-go warn of unsorted or overlapping
// AcquiredRecords, and its share ETL test lose track of three records).
func TestMergeShareAcquired(t *testing.T) {
	batchAt := func(base int64, n int) []byte {
		recs := make([]recordbatch.Record, n)
		for i := range recs {
			recs[i] = recordbatch.Record{OffsetDelta: int32(i), Value: []byte("v")}
		}
		b := buildBatch(t, 0, recs)
		recordbatch.SetBaseOffset(b, base)
		return b
	}
	b0, b10, b20 := batchAt(0, 10), batchAt(10, 10), batchAt(20, 10)
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

	// Round 1: offsets 10-14 of batch 10 and all of batch 20.
	recs := cat(b10, b20)
	acq := []share.AcquiredRange{{First: 10, Last: 14, DeliveryCount: 1}, {First: 20, Last: 29, DeliveryCount: 1}}
	// Round 2: offsets 3-5 (released meanwhile) and 15-19 of batch 10.
	recs, acq = mergeShareAcquired(recs, acq, cat(b0, b10), []share.AcquiredRange{{First: 3, Last: 5, DeliveryCount: 2}, {First: 15, Last: 19, DeliveryCount: 1}})

	if want := cat(b0, b10, b20); !bytes.Equal(recs, want) {
		t.Fatalf("records: %d bytes, want batches 0, 10, 20 once each (%d bytes)", len(recs), len(want))
	}
	firsts := []int64{}
	for _, a := range acq {
		firsts = append(firsts, a.First)
	}
	if !slices.Equal(firsts, []int64{3, 10, 15, 20}) {
		t.Fatalf("acquired ranges start at %v, want [3 10 15 20]", firsts)
	}

	// A first round takes the records as they are.
	recs, acq = mergeShareAcquired(nil, nil, b0, []share.AcquiredRange{{First: 0, Last: 9, DeliveryCount: 1}})
	if !bytes.Equal(recs, b0) || len(acq) != 1 {
		t.Fatalf("first round: %d bytes, %v", len(recs), acq)
	}
}
