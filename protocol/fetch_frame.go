package protocol

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/storage"
)

// Fetch responses without copies: a response whose partitions' records
// are file ranges is encoded as parts (frame.go), each range placed right
// after its records' length prefix, so the stored batches go from the
// segment file to the socket. The encoding follows Kafka's
// FetchResponse (v4-v18; flexible from v12) field for field; tests check
// it byte for byte against kmsg's.

// appendFetchFrame encodes resp (at resp.Version) as a response frame in
// parts, with files[t][p] (nil: none) as the records of
// resp.Topics[t].Partitions[p] in place of its RecordBatches. ok is false
// when resp carries fields this encoder does not write (tagged fields Regent
// never sets); the caller then encodes with kmsg.
func appendFetchFrame(correlationID int32, resp *kmsg.FetchResponse, files [][]*storage.FileRange) (parts []Part, ok bool) {
	if !plainFetchResponse(resp) {
		return nil, false
	}
	v := resp.Version
	flex := v >= 12
	b := &frameBuf{buf: make([]byte, 0, 256+fetchResponseSize(resp))}
	b.int32(0) // length, set by parts()
	b.int32(correlationID)
	if flex {
		b.uvarint(0) // response header tags
	}
	b.int32(resp.ThrottleMillis)
	if v >= 7 {
		b.int16(resp.ErrorCode)
		b.int32(resp.SessionID)
	}
	b.arrayLen(len(resp.Topics), false, flex)
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		if v >= 13 {
			b.buf = append(b.buf, t.TopicID[:]...)
		} else {
			b.string(t.Topic, flex)
		}
		b.arrayLen(len(t.Partitions), false, flex)
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			b.int32(p.Partition)
			b.int16(p.ErrorCode)
			b.int64(p.HighWatermark)
			b.int64(p.LastStableOffset)
			if v >= 5 {
				b.int64(p.LogStartOffset)
			}
			b.arrayLen(len(p.AbortedTransactions), p.AbortedTransactions == nil, flex)
			for _, a := range p.AbortedTransactions {
				b.int64(a.ProducerID)
				b.int64(a.FirstOffset)
				if flex {
					b.uvarint(0)
				}
			}
			if v >= 11 {
				b.int32(p.PreferredReadReplica)
			}
			var f *storage.FileRange
			if ti < len(files) && pi < len(files[ti]) {
				f = files[ti][pi]
			}
			if f != nil {
				b.bytesLen(f.Len(), false, flex)
				b.file(f)
			} else {
				b.bytesLen(len(p.RecordBatches), p.RecordBatches == nil, flex)
				b.buf = append(b.buf, p.RecordBatches...)
			}
			if flex {
				b.uvarint(0) // partition tags: none set (plainFetchResponse)
			}
		}
		if flex {
			b.uvarint(0)
		}
	}
	if flex {
		b.uvarint(0)
	}
	return b.parts(), true
}

// plainFetchResponse says resp sets none of the tagged fields (diverging
// epoch, current leader, snapshot id, node endpoints, unknown tags) that
// appendFetchFrame leaves out. Regent sets none of them today.
func plainFetchResponse(resp *kmsg.FetchResponse) bool {
	if resp.Version < 4 || resp.UnknownTags.Len() > 0 || len(resp.Brokers) > 0 {
		return false
	}
	for _, t := range resp.Topics {
		if t.UnknownTags.Len() > 0 {
			return false
		}
		for _, p := range t.Partitions {
			if p.UnknownTags.Len() > 0 ||
				p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1 || p.DivergingEpoch.UnknownTags.Len() > 0 ||
				p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1 || p.CurrentLeader.UnknownTags.Len() > 0 ||
				p.SnapshotID.EndOffset != -1 || p.SnapshotID.Epoch != -1 || p.SnapshotID.UnknownTags.Len() > 0 {
				return false
			}
			for _, a := range p.AbortedTransactions {
				if a.UnknownTags.Len() > 0 {
					return false
				}
			}
		}
	}
	return true
}
