package share

// ShareFetch's BatchSize (v1+), as Kafka 4.3 applies it: in
// batch_optimized mode, a run of newly acquired records (delivery count
// 1) longer than BatchSize is answered as several acquired ranges, cut at
// stored batch boundaries, each starting at a batch whose base is at least
// BatchSize offsets past the range's first: ranges of about BatchSize
// records that never split a stored batch. Records delivered again, and
// record_limit mode, are not split (Kafka answers those as they come).
// Only the answer is split: the state keeps one span per run, which
// acknowledgements and locks treat offset by offset anyway.

// splitToBatchSize returns ranges with each new run cut as above; batches
// are the stored batches read, in offset order.
func splitToBatchSize(ranges []AcquiredRange, batches []Batch, batchSize int64) []AcquiredRange {
	if batchSize <= 0 {
		return ranges
	}
	var out []AcquiredRange
	for _, r := range ranges {
		if r.DeliveryCount != 1 || r.Last-r.First+1 <= batchSize {
			out = append(out, r)
			continue
		}
		first := r.First
		for _, b := range batches {
			if b.Base > r.Last {
				break
			}
			if b.Base > first && b.Base-first >= batchSize {
				out = append(out, AcquiredRange{First: first, Last: b.Base - 1, DeliveryCount: 1})
				first = b.Base
			}
		}
		out = append(out, AcquiredRange{First: first, Last: r.Last, DeliveryCount: 1})
	}
	return out
}
