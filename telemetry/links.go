package telemetry

import (
	"bytes"
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// traceparentKey is the W3C trace-context record header key.
var traceparentKey = []byte("traceparent")

// maxLinks bounds the links one partition span carries (the SDK's default
// span link limit).
const maxLinks = 128

// recordLinks reads the W3C trace context (traceparent, tracestate record
// headers, as franz-go's kotel and the Java instrumentation write them) of
// every record in the uncompressed batches of a produce's record set and
// returns one link per distinct producer span. Compressed batches are not
// decompressed for this: their records are counted but not linked. count is
// the number of records, linked how many carried a valid traceparent.
// Malformed input yields what was read before it (the partition rejects it
// anyway).
func recordLinks(records []byte) (links []trace.Link, count, linked int) {
	type spanKey struct {
		trace [16]byte
		span  [8]byte
	}
	var seen map[spanKey]struct{}
	tc := propagation.TraceContext{}
	for pos := 0; pos+recordbatch.HeaderSize <= len(records); {
		h, err := recordbatch.ParseHeader(records[pos:])
		if err != nil || h.TotalSize() <= 0 || pos+h.TotalSize() > len(records) {
			break
		}
		batch := records[pos : pos+h.TotalSize()]
		pos += h.TotalSize()
		count += int(h.NumRecords)
		if h.Compression() != recordbatch.CodecNone || h.IsControl() {
			continue
		}
		// Decode only batches that can hold the header at all: a scan
		// for its key is far cheaper than decoding every record.
		if !bytes.Contains(batch[recordbatch.HeaderSize:], traceparentKey) {
			continue
		}
		recs, err := recordbatch.Records(batch)
		if err != nil {
			continue
		}
		for i := range recs {
			c := headerCarrier(recs[i].Headers)
			if c.Get("traceparent") == "" {
				continue
			}
			sc := trace.SpanContextFromContext(tc.Extract(context.Background(), c))
			if !sc.IsValid() {
				continue
			}
			linked++
			k := spanKey{sc.TraceID(), sc.SpanID()}
			if _, dup := seen[k]; dup || len(links) >= maxLinks {
				continue
			}
			if seen == nil {
				seen = map[spanKey]struct{}{}
			}
			seen[k] = struct{}{}
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	return links, count, linked
}

// headerCarrier reads trace context from record headers.
type headerCarrier []recordbatch.RecordHeader

func (c headerCarrier) Get(key string) string {
	for _, h := range c {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func (c headerCarrier) Set(string, string) {}

func (c headerCarrier) Keys() []string {
	keys := make([]string, len(c))
	for i, h := range c {
		keys[i] = h.Key
	}
	return keys
}
