package group

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func offsetRec(group, topic string, p int32, off int64) Record {
	return Record{Kind: RecOffset, Group: group, Topic: topic, Partition: p,
		Offset: Offset{Offset: off, LeaderEpoch: 3, Metadata: "m", CommitTime: time.UnixMilli(1_700_000_000_123)}}
}

func metaRec(group string, gen int32) Record {
	v := &kmsg.GroupMetadataValue{}
	v.Default()
	v.Version = 3
	v.ProtocolType = "consumer"
	v.Generation = gen
	p, l := "range", "m1"
	v.Protocol, v.Leader = &p, &l
	inst := "i1"
	v.Members = []kmsg.GroupMetadataValueMember{{MemberID: "m1", InstanceID: &inst, ClientID: "c", ClientHost: "/h",
		RebalanceTimeoutMillis: 1000, SessionTimeoutMillis: 6000, Subscription: []byte("sub"), Assignment: []byte("asg")}}
	return Record{Kind: RecGroup, Group: group, Meta: v}
}

func TestStoreReplay(t *testing.T) {
	dir := t.TempDir()
	s, loaded, err := OpenStore(dir, false, nil)
	if err != nil || len(loaded) != 0 {
		t.Fatalf("open: %v %v", loaded, err)
	}
	must(t, s.Append([]Record{metaRec("g1", 1), offsetRec("g1", "t", 0, 10), offsetRec("g1", "t", 1, 11)}))
	must(t, s.Append([]Record{offsetRec("g1", "t", 0, 20), offsetRec("g2", "x", 0, 5)}))
	must(t, s.Append([]Record{{Kind: RecOffsetTombstone, Group: "g1", Topic: "t", Partition: 1}}))
	must(t, s.Append([]Record{offsetRec("g3", "x", 0, 1), {Kind: RecGroupTombstone, Group: "g3"}}))
	must(t, s.Close())

	_, loaded, err = OpenStore(dir, false, nil)
	must(t, err)
	if len(loaded) != 2 || len(loaded["g1"]) != 2 || len(loaded["g2"]) != 1 {
		t.Fatalf("loaded %v", loaded)
	}
	g := NewGroup("g1", &Config{})
	g.Restore(loaded["g1"], time.Now())
	if o, ok := g.Committed("t", 0); !ok || o.Offset != 20 || o.LeaderEpoch != 3 || o.Metadata != "m" || o.CommitTime.UnixMilli() != 1_700_000_000_123 {
		t.Fatalf("offset %+v", o)
	}
	if _, ok := g.Committed("t", 1); ok {
		t.Fatal("tombstoned offset came back")
	}
	if g.generation != 1 || len(g.members) != 1 || string(g.members["m1"].assignment) != "asg" || *g.members["m1"].instanceID != "i1" {
		t.Fatal("metadata not restored")
	}
}

func TestStoreTornTail(t *testing.T) {
	dir := t.TempDir()
	s, _, err := OpenStore(dir, false, nil)
	must(t, err)
	must(t, s.Append([]Record{offsetRec("g", "t", 0, 1)}))
	must(t, s.Append([]Record{offsetRec("g", "t", 0, 2)}))
	good := s.Size()
	must(t, s.Append([]Record{offsetRec("g", "t", 0, 3)}))
	full := s.Size()
	must(t, s.Close())

	path := filepath.Join(dir, logName)
	for _, cut := range []int64{full - 1, good + 5, good + 1} {
		must(t, os.Truncate(path, cut))
		s, loaded, err := OpenStore(dir, false, nil)
		must(t, err)
		g := NewGroup("g", &Config{})
		g.Restore(loaded["g"], time.Now())
		if o, _ := g.Committed("t", 0); o.Offset != 2 {
			t.Fatalf("cut at %d: offset %d, want 2", cut, o.Offset)
		}
		if s.Size() != good {
			t.Fatalf("cut at %d: size %d, want truncated to %d", cut, s.Size(), good)
		}
		// Appending after a torn tail goes on from the good prefix.
		must(t, s.Append([]Record{offsetRec("g", "t", 0, 4)}))
		must(t, s.Close())
		_, loaded, err = OpenStore(dir, false, nil)
		must(t, err)
		g = NewGroup("g", &Config{})
		g.Restore(loaded["g"], time.Now())
		if o, _ := g.Committed("t", 0); o.Offset != 4 {
			t.Fatalf("after append: offset %d", o.Offset)
		}
		must(t, os.Truncate(path, good))
	}

	// A flipped byte in the middle: everything from there is dropped.
	raw, _ := os.ReadFile(path)
	raw[len(raw)-3] ^= 0xff
	must(t, os.WriteFile(path, raw, 0o644))
	_, loaded, err := OpenStore(dir, false, nil)
	must(t, err)
	g := NewGroup("g", &Config{})
	g.Restore(loaded["g"], time.Now())
	if o, _ := g.Committed("t", 0); o.Offset != 1 {
		t.Fatalf("corrupt frame: offset %d, want 1", o.Offset)
	}
}

func TestStoreCompaction(t *testing.T) {
	dir := t.TempDir()
	s, _, err := openStore(dir, false, nil, 4096)
	must(t, err)
	for i := 0; i < 2000; i++ {
		recs := []Record{offsetRec("g", "t", int32(i%4), int64(i))}
		if i%100 == 0 {
			recs = append(recs, metaRec("g", int32(i)))
		}
		if i == 1500 {
			recs = append(recs, offsetRec("gone", "t", 0, 1), Record{Kind: RecGroupTombstone, Group: "gone"})
		}
		must(t, s.Append(recs))
	}
	if s.Size() > 8192 {
		t.Fatalf("log never compacted: %d bytes", s.Size())
	}
	must(t, s.Append([]Record{offsetRec("g", "u", 0, 77)}))
	must(t, s.Close())
	if _, err := os.Stat(filepath.Join(dir, tmpName)); !os.IsNotExist(err) {
		t.Fatalf("snapshot temp file left: %v", err)
	}
	_, loaded, err := OpenStore(dir, false, nil)
	must(t, err)
	if _, ok := loaded["gone"]; ok {
		t.Fatal("deleted group survived compaction")
	}
	g := NewGroup("g", &Config{})
	g.Restore(loaded["g"], time.Now())
	for p := int32(0); p < 4; p++ {
		if o, _ := g.Committed("t", p); o.Offset != int64(1996+p) {
			t.Fatalf("partition %d: %d", p, o.Offset)
		}
	}
	if o, _ := g.Committed("u", 0); o.Offset != 77 || g.generation != 1900 {
		t.Fatalf("u %d gen %d", o.Offset, g.generation)
	}
}

func TestStoreStaleSnapshotIgnored(t *testing.T) {
	dir := t.TempDir()
	s, _, err := OpenStore(dir, false, nil)
	must(t, err)
	must(t, s.Append([]Record{offsetRec("g", "t", 0, 5)}))
	must(t, s.Close())
	// A crash mid-compaction leaves a partial snapshot beside the log.
	must(t, os.WriteFile(filepath.Join(dir, tmpName), []byte("partial"), 0o644))
	_, loaded, err := OpenStore(dir, false, nil)
	must(t, err)
	if len(loaded["g"]) != 1 {
		t.Fatalf("loaded %v", loaded)
	}
}

// The frame format is the one groups.log has always had: a file written
// before the store moved onto storage/recordlog reads, and the store
// still writes the same bytes.
func TestStoreFrameFormat(t *testing.T) {
	r := offsetRec("g", "t", 2, 9)
	key, value := r.encode()
	body := binary.BigEndian.AppendUint32(nil, uint32(len(key)))
	body = append(body, key...)
	body = binary.BigEndian.AppendUint32(body, uint32(len(value)))
	body = append(body, value...)
	frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
	frame = binary.BigEndian.AppendUint32(frame, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	frame = append(frame, body...)
	tk, _ := (&Record{Kind: RecOffsetTombstone, Group: "g", Topic: "t", Partition: 3}).encode()
	tomb := binary.BigEndian.AppendUint32(nil, uint32(len(tk)))
	tomb = append(tomb, tk...)
	tomb = binary.BigEndian.AppendUint32(tomb, 0xFFFFFFFF)
	tframe := binary.BigEndian.AppendUint32(nil, uint32(4+len(tomb)))
	tframe = binary.BigEndian.AppendUint32(tframe, crc32.Checksum(tomb, crc32.MakeTable(crc32.Castagnoli)))
	tframe = append(tframe, tomb...)
	if got := appendFrame(nil, &r); !bytes.Equal(got, frame) {
		t.Fatalf("frame\n%x\nwant\n%x", got, frame)
	}
	tr := Record{Kind: RecOffsetTombstone, Group: "g", Topic: "t", Partition: 3}
	if got := appendFrame(nil, &tr); !bytes.Equal(got, tframe) {
		t.Fatalf("tombstone frame\n%x\nwant\n%x", got, tframe)
	}

	dir := t.TempDir()
	old := append(append(bytes.Clone(frame), appendFrame(nil, &Record{Kind: RecOffset, Group: "g", Topic: "t", Partition: 3, Offset: Offset{Offset: 1}})...), tframe...)
	must(t, os.WriteFile(filepath.Join(dir, logName), old, 0o644))
	s, loaded, err := OpenStore(dir, false, nil)
	must(t, err)
	defer s.Close()
	if len(loaded["g"]) != 1 || loaded["g"][0].Offset != r.Offset || loaded["g"][0].Partition != 2 {
		t.Fatalf("loaded %+v", loaded)
	}
	if s.Size() != int64(len(old)) {
		t.Fatalf("size %d, want %d", s.Size(), len(old))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func BenchmarkStoreAppend(b *testing.B) {
	s, _, err := OpenStore(b.TempDir(), false, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	recs := make([]Record, 10)
	for i := range recs {
		recs[i] = offsetRec("group", "topic", int32(i), 0)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range recs {
			recs[j].Offset.Offset = int64(i)
		}
		if err := s.Append(recs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(s.Size())/float64(b.N), "bytes/op-log")
	_ = fmt.Sprint()
}

func TestRecordCodecRoundTrip(t *testing.T) {
	c := newConsumerGroup()
	c.epoch, c.assignmentEpoch = 3, 3
	inst := "i"
	c.members["m"] = &cgMember{id: "m", instanceID: &inst, subscribedNames: []string{"a"}, epoch: 3, prevEpoch: 2,
		assigned: assignment{{1}: {0, 2}}, rebalanceTimeout: 5 * time.Second, resolved: []string{"a"}}
	c.static["i"] = "m"
	c.target["m"] = assignment{{1}: {0, 1, 2}}
	c.topics["a"] = topicMeta{name: "a", id: [16]byte{1}, partitions: 3}
	recs := []Record{
		offsetRec("g", "t", 4, 99),
		{Kind: RecOffsetTombstone, Group: "g", Topic: "t", Partition: 4},
		metaRec("g", 7),
		{Kind: RecGroupTombstone, Group: "g"},
		{Kind: RecConsumerGroup, Group: "g", CG: &cgSnapshot{raw: c.encodeWithMembers()}},
		{Kind: RecConsumerGroup, Group: "g"},
		{Kind: RecTxnOffset, Group: "g", Topic: "t", Partition: 1, ProducerID: 1 << 40, Offset: Offset{Offset: 5, LeaderEpoch: 2, Metadata: "x", CommitTime: time.UnixMilli(42)}},
		{Kind: RecTxnOffsetTombstone, Group: "g", Topic: "t", Partition: 1, ProducerID: 1 << 40},
	}
	for _, r := range recs {
		key, value := r.encode()
		d, err := decodeRecord(key, value)
		if err != nil {
			t.Fatalf("%v: %v", r.Kind, err)
		}
		if d.Kind != r.Kind || d.Group != r.Group || d.Topic != r.Topic || d.Partition != r.Partition || d.ProducerID != r.ProducerID || d.Offset != r.Offset || d.storeKey() != r.storeKey() {
			t.Fatalf("%v: decoded %+v", r.Kind, d)
		}
	}
	key, value := recs[4].encode()
	d, _ := decodeRecord(key, value)
	got, err := decodeConsumerGroup(d.CG.raw)
	if err != nil || got.epoch != 3 || !got.members["m"].assigned.equal(c.members["m"].assigned) || !got.target["m"].equal(c.target["m"]) || got.static["i"] != "m" || got.topics["a"] != c.topics["a"] {
		t.Fatalf("consumer group %+v %v", got, err)
	}
	// A truncated snapshot is refused, not misread.
	for n := 1; n < len(d.CG.raw); n++ {
		if _, err := decodeConsumerGroup(d.CG.raw[:n]); err == nil {
			t.Fatalf("truncated at %d decoded", n)
		}
	}
}

// FuzzDecodeRecord: no stored bytes may panic the decoder.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range []Record{offsetRec("g", "t", 1, 2), metaRec("g", 1)} {
		k, v := r.encode()
		f.Add(k, v)
	}
	c := newConsumerGroup()
	c.members["m"] = &cgMember{id: "m", assigned: assignment{{1}: {0}}}
	k, v := (&Record{Kind: RecConsumerGroup, Group: "g", CG: &cgSnapshot{raw: c.encodeWithMembers()}}).encode()
	f.Add(k, v)
	k, v = (&Record{Kind: RecConsumerGroup, Group: "g", CG: &cgSnapshot{raw: c.encode()}}).encode()
	f.Add(k, v)
	k, v = (&Record{Kind: RecConsumerGroupMember, Group: "g", Member: "m", CGM: &cgSnapshot{raw: c.encodeMember("m")}}).encode()
	f.Add(k, v)
	sg := newShareGroup()
	sg.members["m"] = &shareMember{id: "m", subscribed: []string{"t"}, assigned: assignment{{1}: {0}}}
	sg.target["m"] = assignment{{1}: {0}}
	k, v = (&Record{Kind: RecShareGroup, Group: "g", SG: &sgSnapshot{raw: sg.encode()}}).encode()
	f.Add(k, v)
	f.Fuzz(func(t *testing.T, key, value []byte) {
		_, _ = decodeRecord(key, value)
	})
}
