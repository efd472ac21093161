package share

import (
	"slices"
	"testing"
)

func TestSplitToBatchSize(t *testing.T) {
	tens := []Batch{{Base: 0, Last: 9}, {Base: 10, Last: 19}, {Base: 20, Last: 29}, {Base: 30, Last: 39}}
	cases := []struct {
		name    string
		ranges  []AcquiredRange
		batches []Batch
		size    int64
		want    []AcquiredRange
	}{
		{"no batch size", []AcquiredRange{{0, 39, 1}}, tens, 0, []AcquiredRange{{0, 39, 1}}},
		{"run within the size", []AcquiredRange{{0, 39, 1}}, tens, 40, []AcquiredRange{{0, 39, 1}}},
		{"cut at batch bases", []AcquiredRange{{0, 39, 1}}, tens, 20, []AcquiredRange{{0, 19, 1}, {20, 39, 1}}},
		{"a cut waits for a batch base", []AcquiredRange{{0, 39, 1}}, tens, 15, []AcquiredRange{{0, 19, 1}, {20, 39, 1}}},
		{"size below a batch: one range per batch", []AcquiredRange{{0, 29, 1}}, tens, 3, []AcquiredRange{{0, 9, 1}, {10, 19, 1}, {20, 29, 1}}},
		{"one big batch is never split", []AcquiredRange{{0, 99, 1}}, []Batch{{Base: 0, Last: 99}}, 10, []AcquiredRange{{0, 99, 1}}},
		{"redelivered records are not split", []AcquiredRange{{0, 19, 2}, {20, 39, 1}}, tens, 10, []AcquiredRange{{0, 19, 2}, {20, 29, 1}, {30, 39, 1}}},
		{"a run starting inside a batch", []AcquiredRange{{5, 39, 1}}, tens, 10, []AcquiredRange{{5, 19, 1}, {20, 29, 1}, {30, 39, 1}}},
	}
	for _, c := range cases {
		if got := splitToBatchSize(c.ranges, c.batches, c.size); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// TestManagerBatchSize: the Manager answers new records in ranges cut to
// BatchSize at batch boundaries in batch_optimized mode, and not in
// record_limit mode; the records are acquired all the same.
func TestManagerBatchSize(t *testing.T) {
	h := newHarness(t, Config{AutoOffsetReset: "earliest"})
	for range 6 {
		h.log.append(5, false, false, -1)
	}
	r := wait(h.t, func(reply func(AcquireResult)) {
		h.m.Acquire(AcquireRequest{Key: key, Member: "a", MaxRecords: 20, BatchSize: 8}, reply)
	})
	if want := []AcquiredRange{{0, 9, 1}, {10, 19, 1}}; !slices.Equal(r.Acquired, want) {
		t.Fatalf("batch_optimized: %v, want %v", r.Acquired, want)
	}
	r = wait(h.t, func(reply func(AcquireResult)) {
		h.m.Acquire(AcquireRequest{Key: key, Member: "b", MaxRecords: 10, BatchSize: 3, RecordLimit: true}, reply)
	})
	if want := []AcquiredRange{{20, 29, 1}}; !slices.Equal(r.Acquired, want) {
		t.Fatalf("record_limit: %v, want %v", r.Acquired, want)
	}
}
