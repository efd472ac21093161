package protocol

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/storage/recordbatch"
)

func buildBatch(t *testing.T, codec int8, recs []recordbatch.Record) []byte {
	t.Helper()
	b, err := recordbatch.Build(recordbatch.Header{Attributes: int16(codec), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lie rewrites a batch's record count and last offset delta and re-signs it,
// so that only checks of the records themselves can catch the lie.
func lie(b []byte, numRecords, lastOffsetDelta int32) []byte {
	b = bytes.Clone(b)
	binary.BigEndian.PutUint32(b[23:], uint32(lastOffsetDelta))
	binary.BigEndian.PutUint32(b[57:], uint32(numRecords))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// gzipBomb is a gzip batch of one record whose value is n MiB of zeros,
// made of repeated gzip members so the test never holds the zeros.
func gzipBomb(t *testing.T, mib int) []byte {
	t.Helper()
	member := func(p []byte) []byte {
		var b bytes.Buffer
		w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		w.Write(p)
		w.Close()
		return b.Bytes()
	}
	valueLen := mib << 20
	body := []byte{0, 0, 0, 1} // attributes, timestamp and offset deltas, null key
	body = binary.AppendVarint(body, int64(valueLen))
	rec := binary.AppendVarint(nil, int64(len(body)+valueLen+1))
	rec = append(rec, body...)
	var sec bytes.Buffer
	sec.Write(member(rec))
	zeros := member(make([]byte, 1<<20))
	for range mib {
		sec.Write(zeros)
	}
	sec.Write(member([]byte{0}))
	// Wrap a built one-record batch's header around the bomb.
	b := buildBatch(t, recordbatch.CodecNone, []recordbatch.Record{{Value: []byte("x")}})[:recordbatch.HeaderSize]
	b = append(b, sec.Bytes()...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint16(b[21:], uint16(recordbatch.CodecGzip))
	return lie(b, 1, 0)
}

func produceOne(t *testing.T, s *Server, version int16, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := call[*kmsg.ProduceResponse](t, s, req)
	return resp.Topics[0].Partitions[0]
}

// TestProduceRefusesInvalidBatches checks the error code, message and
// record errors Produce answers for batches Kafka refuses, and that a
// refused batch leaves the log end offset where it was.
func TestProduceRefusesInvalidBatches(t *testing.T) {
	s := groupServer(t)
	compact := "compact"
	if _, err := s.topics.Create(topics.CreateSpec{Name: "c", Partitions: 1, ReplicationFactor: -1,
		Configs: map[string]*string{"cleanup.policy": &compact}}); err != nil {
		t.Fatal(err)
	}
	one := buildBatch(t, recordbatch.CodecNone, []recordbatch.Record{{Key: []byte("k"), Value: []byte("v")}})
	gap := buildBatch(t, recordbatch.CodecGzip, []recordbatch.Record{{OffsetDelta: 0, Key: []byte("a")}, {OffsetDelta: 2, Key: []byte("b")}})
	badCRC := bytes.Clone(one)
	badCRC[len(badCRC)-1] ^= 0xff
	noKey := buildBatch(t, recordbatch.CodecLz4, []recordbatch.Record{{OffsetDelta: 0, Key: []byte("k")}, {OffsetDelta: 1, KeyNull: true, Value: []byte("v")}})

	cases := []struct {
		name      string
		topic     string
		batch     []byte
		want      *kerr.Error
		msg       string // in the error message
		recordIdx int32  // -1: no record error expected
	}{
		{"1e9 records claimed", "t", lie(one, 1_000_000_000, 999_999_999), kerr.InvalidRecord, "cannot fit", -1},
		{"1e9 offset slots for one record", "t", lie(one, 1, 1_000_000_000), kerr.InvalidRecord, "offset range", -1},
		{"offset gap (lastOffsetDelta 1)", "t", lie(gap, 2, 1), kerr.InvalidRecord, "offset delta", 1},
		{"bad CRC", "t", badCRC, kerr.CorruptMessage, "CRC", -1},
		{"gzip bomb on a plain topic", "t", gzipBomb(t, 40), kerr.InvalidRecord, "decompress", -1},
		{"gzip bomb on a compacted topic", "c", gzipBomb(t, 40), kerr.InvalidRecord, "decompress", -1},
		{"null key on a compacted topic", "c", noKey, kerr.InvalidRecord, "key", 1},
	}
	for _, v := range []int16{3, 7, 8, 9, 12} {
		for _, c := range cases {
			p := produceOne(t, s, v, c.topic, c.batch)
			code(t, c.name, p.ErrorCode, c.want)
			if v < 8 {
				continue // no error message or record errors before v8
			}
			if p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, c.msg) {
				t.Errorf("v%d %s: message %v, want one mentioning %q", v, c.name, p.ErrorMessage, c.msg)
			}
			switch {
			case c.recordIdx < 0 && len(p.ErrorRecords) != 0:
				t.Errorf("v%d %s: record errors %+v, want none", v, c.name, p.ErrorRecords)
			case c.recordIdx >= 0 && (len(p.ErrorRecords) != 1 || p.ErrorRecords[0].RelativeOffset != c.recordIdx):
				t.Errorf("v%d %s: record errors %+v, want record %d", v, c.name, p.ErrorRecords, c.recordIdx)
			}
		}
	}
	// Nothing refused moved the log end: the next good batch lands at 0.
	for _, topic := range []string{"t", "c"} {
		p := produceOne(t, s, 9, topic, one)
		code(t, "good batch", p.ErrorCode, nil)
		if p.BaseOffset != 0 {
			t.Fatalf("topic %s: good batch at offset %d, want 0", topic, p.BaseOffset)
		}
	}
}

// heldReplicator is a Local replicator without its FreeAtDone promise: one
// that may still read a command's bytes when it answers.
type heldReplicator struct{ local *replication.Local }

func (h heldReplicator) Register(key string, a replication.Applier) { h.local.Register(key, a) }
func (h heldReplicator) Unregister(key string)                      { h.local.Unregister(key) }
func (h heldReplicator) Propose(key string, cmd replication.Command, done func(any, error)) {
	h.local.Propose(key, cmd, done)
}

// TestProduceFreesFrameOnlyWhenPartitionsDo: a produce frees its frame for
// reuse (netio's pool) only when every partition that took records says
// it holds nothing of them; with a replicator that may still hold them, or
// a partition that refused before proposing, the frame is left alone or
// freed accordingly.
func TestProduceFreesFrameOnlyWhenPartitionsDo(t *testing.T) {
	batch := func() []byte {
		return buildBatch(t, recordbatch.CodecNone, []recordbatch.Record{{Key: []byte("k"), Value: []byte("v")}})
	}
	produce := func(s *Server, parts ...int32) (*Request, *kmsg.ProduceResponse) {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks = -1
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		for _, p := range parts {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, batch()
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return serveRequest[*kmsg.ProduceResponse](t, s, req)
	}

	local := groupServer(t)
	r, resp := produce(local, 0, 1, 2)
	for _, p := range resp.Topics[0].Partitions {
		code(t, "local produce", p.ErrorCode, nil)
	}
	if !r.FrameFree() {
		t.Error("single node: frame not freed after every partition applied in place")
	}
	r, resp = produce(local, 0, 7) // partition 7 refused before any append
	code(t, "unknown partition", resp.Topics[0].Partitions[1].ErrorCode, kerr.UnknownTopicOrPartition)
	if !r.FrameFree() {
		t.Error("single node: frame not freed with one partition refused up front")
	}

	held := groupServerOn(t, heldReplicator{replication.NewLocal()})
	r, resp = produce(held, 0, 1)
	for _, p := range resp.Topics[0].Partitions {
		code(t, "held produce", p.ErrorCode, nil)
	}
	if r.FrameFree() {
		t.Error("replicator that may hold records: frame freed")
	}
}
