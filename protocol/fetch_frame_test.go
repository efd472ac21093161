package protocol

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// rangeLog is a log of n small batches for file ranges in tests.
func rangeLog(t *testing.T, n int) *storage.Log {
	t.Helper()
	l, err := storage.Open(t.TempDir(), storage.Options{SegmentBytes: 1 << 20, Files: storage.NewFileCache(32)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for i := range n {
		recs := make([]recordbatch.Record, 1+i%4)
		for j := range recs {
			recs[j] = recordbatch.Record{OffsetDelta: int32(j), Key: []byte{byte(i)}, Value: bytes.Repeat([]byte{'v'}, 10+i*7%300)}
		}
		b, err := recordbatch.Build(recordbatch.Header{FirstTimestamp: int64(1000 + i), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// TestFetchFrameMatchesKmsg: for every Fetch version served, responses
// with file-range records (whole, cut by max bytes, cut at an offset),
// empty and null records, errors, aborted transaction lists (none, empty,
// several) and many topics encode in parts to exactly kmsg's bytes, and
// kmsg decodes them back.
func TestFetchFrameMatchesKmsg(t *testing.T) {
	l := rangeLog(t, 200)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for v := int16(4); v <= 18; v++ {
		for round := range 40 {
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = v
			resp.ThrottleMillis = int32(round)
			resp.SessionID = rng.Int32()
			var files [][]*storage.FileRange
			for ti := range 1 + rng.IntN(4) {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic = string(rune('a'+ti)) + "-topic"
				rt.TopicID[0], rt.TopicID[15] = byte(ti+1), byte(round)
				var tf []*storage.FileRange
				for pi := range rng.IntN(5) {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition = int32(pi)
					rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 700, 650, 3
					rp.PreferredReadReplica = -1
					rp.RecordBatches = []byte{}
					var fr *storage.FileRange
					switch rng.IntN(5) {
					case 0:
						rp.ErrorCode = 1
					case 1:
						rp.RecordBatches = nil
					default:
						var err error
						fr, err = l.ReadRange(int64(rng.IntN(400)), 1+rng.IntN(20000), rng.IntN(2) == 0)
						if err != nil {
							t.Fatal(err)
						}
						if fr != nil && rng.IntN(3) == 0 {
							if fr.CutBefore(fr.Batches()[0].LastOffset+1+int64(rng.IntN(50))) < 0 {
								t.Fatal("cut past the first batch left nothing")
							}
						}
					}
					switch rng.IntN(3) {
					case 1:
						rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
					case 2:
						for k := range 1 + rng.IntN(3) {
							rp.AbortedTransactions = append(rp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: int64(k + 7), FirstOffset: int64(k * 11)})
						}
					}
					rt.Partitions = append(rt.Partitions, rp)
					tf = append(tf, fr)
				}
				resp.Topics = append(resp.Topics, rt)
				files = append(files, tf)
			}
			corr := rng.Int32()
			parts, ok := appendFetchFrame(corr, resp, files)
			if !ok {
				t.Fatalf("v%d: not encoded in parts", v)
			}
			if parts[0].File != nil {
				t.Fatal("a frame must open with bytes")
			}
			got, err := FlattenParts(parts) // releases the ranges
			if err != nil {
				t.Fatal(err)
			}
			// kmsg's encoding of the same response, records in memory.
			for ti := range files {
				for pi, f := range files[ti] {
					if f != nil {
						b, err := l.ReadRange(f.Batches()[0].BaseOffset, f.Len(), true)
						if err != nil || b == nil {
							t.Fatalf("re-read: %v", err)
						}
						b.CutBefore(f.Batches()[len(f.Batches())-1].LastOffset + 1)
						resp.Topics[ti].Partitions[pi].RecordBatches, err = b.AppendTo(nil)
						b.Release()
						if err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			want := AppendResponseFrame(nil, corr, resp)
			if !bytes.Equal(got, want) {
				t.Fatalf("v%d round %d: parts encode %d bytes, kmsg %d; first difference at %d", v, round, len(got), len(want), firstDiff(got, want))
			}
			dec := kmsg.NewPtrFetchResponse()
			dec.Version = v
			body, err := responseBody(got, v >= 12)
			if err != nil {
				t.Fatal(err)
			}
			if err := dec.ReadFrom(body); err != nil {
				t.Fatalf("v%d: kmsg cannot decode: %v", v, err)
			}
			if len(dec.Topics) != len(resp.Topics) {
				t.Fatalf("v%d: %d topics decoded of %d", v, len(dec.Topics), len(resp.Topics))
			}
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestFetchFrameRefusesTags: a response with a tagged field set is left to
// kmsg.
func TestFetchFrameRefusesTags(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	rt := kmsg.NewFetchResponseTopic()
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.CurrentLeader.LeaderID = 1
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	if _, ok := appendFetchFrame(1, resp, nil); ok {
		t.Fatal("encoded a current leader tag in parts")
	}
}
