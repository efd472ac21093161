package partition

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// memLog is an in-memory Log for tests of the state through its shell.
type memLog struct {
	batches [][]byte
	start   int64
	next    int64
}

func (m *memLog) DeleteRecordsBefore(off int64) error {
	if off < 0 || off > m.next {
		return storage.ErrOffsetOutOfRange
	}
	m.start = max(m.start, off)
	return nil
}

func (m *memLog) AppendAt(b []byte, _ int64) (int64, int64, error) {
	h, err := recordbatch.ParseHeader(b)
	if err != nil {
		return 0, 0, err
	}
	base := m.next
	recordbatch.SetBaseOffset(b, base)
	m.batches = append(m.batches, append([]byte(nil), b...))
	m.next = base + int64(h.LastOffsetDelta) + 1
	return base, m.next - 1, nil
}

func (m *memLog) AppendPatchedAt(head, b []byte, nowMs int64) (int64, int64, error) {
	return m.AppendAt(patchedBatch(head, b), nowMs)
}

// patchedBatch is the batch a log stores for AppendPatchedAt(head, b): a
// new slice, so b stays as it was.
func patchedBatch(head, b []byte) []byte {
	return append(append([]byte(nil), head...), b[recordbatch.HeaderSize:]...)
}

func (m *memLog) Read(off int64, max int, _ bool) ([]byte, error) {
	if off > m.next {
		return nil, storage.ErrOffsetOutOfRange
	}
	var out []byte
	for _, b := range m.batches {
		h, _ := recordbatch.ParseHeader(b)
		if h.LastOffset() >= off && (len(out) == 0 || len(out)+len(b) <= max) {
			out = append(out, b...)
		}
	}
	return out, nil
}

func (m *memLog) StartOffset() int64 { return m.start }
func (m *memLog) NextOffset() int64  { return m.next }

func batch(t *testing.T, pid int64, epoch int16, seq int32, n int, key bool) []byte {
	t.Helper()
	h := recordbatch.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, FirstTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().UnixMilli()}
	if pid < 0 {
		h.ProducerEpoch, h.BaseSequence = -1, -1
	}
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), Value: []byte("v"), KeyNull: !key}
		if key {
			recs[i].Key = []byte{byte(i)}
		}
	}
	b, err := recordbatch.Build(h, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func defaultConfig(t *testing.T) logconfig.Config {
	t.Helper()
	c, err := logconfig.Resolve(nil, logconfig.Broker{})
	if err != nil {
		t.Fatal(err)
	}
	// These tests run the state on a clock of their own (often ms 1000)
	// with batches stamped by time.Now(), decades ahead of it: Kafka 4's
	// one-hour message.timestamp.after.max.ms would refuse them.
	// validate.txt checks the bound itself.
	c.MessageTimestampAfterMaxMs = math.MaxInt64
	return c
}

// TestIdempotenceScript walks a producer through Kafka's sequence rules.
func TestIdempotenceScript(t *testing.T) {
	st, err := openStateLog(&memLog{}, defaultConfig(t), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	steps := []struct {
		name     string
		records  []byte
		wantErr  error
		wantBase int64
	}{
		{"first batch", batch(t, 7, 0, 0, 3, false), nil, 0},
		{"next batch", batch(t, 7, 0, 3, 2, false), nil, 3},
		{"retry of first is a duplicate", batch(t, 7, 0, 0, 3, false), nil, 0},
		{"retry of second is a duplicate", batch(t, 7, 0, 3, 2, false), nil, 3},
		{"gap", batch(t, 7, 0, 9, 1, false), kerr.OutOfOrderSequenceNumber, -1},
		{"third batch", batch(t, 7, 0, 5, 1, false), nil, 5},
		{"unknown producer: any sequence (KIP-360)", batch(t, 8, 0, 4, 1, false), nil, 6},
		{"and then in sequence", batch(t, 8, 0, 6, 1, false), kerr.OutOfOrderSequenceNumber, -1},
		{"bumped epoch restarts at 0", batch(t, 7, 1, 0, 1, false), nil, 7},
		{"old epoch fenced", batch(t, 7, 0, 6, 1, false), kerr.InvalidProducerEpoch, -1},
		{"non-idempotent", batch(t, -1, -1, -1, 4, false), nil, 8},
	}
	for _, s := range steps {
		res := st.produce(s.records, now.UnixMilli())
		if !errors.Is(res.Err, s.wantErr) && !(res.Err == nil && s.wantErr == nil) {
			t.Fatalf("%s: err %v, want %v (%s)", s.name, res.Err, s.wantErr, res.ErrMessage)
		}
		if res.BaseOffset != s.wantBase {
			t.Fatalf("%s: base offset %d, want %d", s.name, res.BaseOffset, s.wantBase)
		}
	}
}

// TestProducerStateRebuiltFromLog checks duplicates are still detected
// after a restart rebuilds state from the log.
func TestProducerStateRebuiltFromLog(t *testing.T) {
	lg := &memLog{}
	st, _ := openStateLog(lg, defaultConfig(t), 0, "", nil)
	now := time.Now()
	for i := int32(0); i < 7; i++ {
		if res := st.produce(batch(t, 3, 0, i*2, 2, false), now.UnixMilli()); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	st2, err := openStateLog(lg, defaultConfig(t), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := st2.produce(batch(t, 3, 0, 12, 2, false), now.UnixMilli()); res.Err != nil || res.BaseOffset != 12 {
		t.Fatalf("duplicate after rebuild: %+v", res)
	}
	if res := st2.produce(batch(t, 3, 0, 14, 1, false), now.UnixMilli()); res.Err != nil || res.BaseOffset != 14 {
		t.Fatalf("next after rebuild: %+v", res)
	}
}

func TestTopicLimits(t *testing.T) {
	now := time.Now()
	cfg := defaultConfig(t)
	cfg.MaxMessageBytes = 100
	st, _ := openStateLog(&memLog{}, cfg, 0, "", nil)
	if res := st.produce(batch(t, -1, -1, -1, 20, false), now.UnixMilli()); !errors.Is(res.Err, kerr.MessageTooLarge) {
		t.Fatalf("oversized batch: %v", res.Err)
	}
	cfg = defaultConfig(t)
	cfg.CleanupCompact = true
	st, _ = openStateLog(&memLog{}, cfg, 0, "", nil)
	if res := st.produce(batch(t, -1, -1, -1, 2, false), now.UnixMilli()); !errors.Is(res.Err, kerr.InvalidRecord) {
		t.Fatalf("keyless record on compacted topic: %v", res.Err)
	}
	if res := st.produce(batch(t, -1, -1, -1, 2, true), now.UnixMilli()); res.Err != nil {
		t.Fatalf("keyed record on compacted topic: %v", res.Err)
	}
	cfg = defaultConfig(t)
	cfg.LogAppendTime = true
	lg := &memLog{}
	st, _ = openStateLog(lg, cfg, 0, "", nil)
	res := st.produce(batch(t, -1, -1, -1, 2, false), now.UnixMilli())
	if res.Err != nil || res.LogAppendTime != now.UnixMilli() {
		t.Fatalf("LogAppendTime: %+v", res)
	}
	h, err := recordbatch.Validate(lg.batches[0])
	if err != nil || h.TimestampType() != 1 || h.MaxTimestamp != now.UnixMilli() {
		t.Fatalf("stored batch after LogAppendTime: %+v %v", h, err)
	}
	if res := st.produce([]byte{1, 2, 3}, now.UnixMilli()); !errors.Is(res.Err, kerr.CorruptMessage) {
		t.Fatalf("garbage records: %v", res.Err)
	}
}

// TestCheckedProduce: CheckProduce refuses what Produce would for the
// records themselves; ProduceChecked, for records a proposer checked,
// skips those checks but not the topic's limits on a batch's header, nor
// the sequence checks.
func TestCheckedProduce(t *testing.T) {
	now := time.Now().UnixMilli()
	cfg := defaultConfig(t)
	cfg.CleanupCompact = true
	st := NewState(cfg, 0, 0, 0)

	bad := batch(t, -1, -1, -1, 2, true)
	bad[len(bad)-1] ^= 0xff // records changed under the CRC
	keyless := batch(t, -1, -1, -1, 2, false)
	for name, tc := range map[string]struct {
		records []byte
		want    error
	}{
		"bad crc":       {bad, kerr.CorruptMessage},
		"keyless":       {keyless, kerr.InvalidRecord},
		"garbage":       {[]byte{1, 2, 3}, kerr.CorruptMessage},
		"control batch": {controlBatch(t), kerr.InvalidRecord},
	} {
		res := st.CheckProduce(tc.records, now)
		full, a := st.Produce(tc.records, now)
		if !errors.Is(res.Err, tc.want) || res.Err != full.Err || res.ErrMessage != full.ErrMessage || len(a.Batches) != 0 || res.BaseOffset != -1 {
			t.Fatalf("%s: CheckProduce %+v, Produce %+v, want %v", name, res, full, tc.want)
		}
	}
	if res := st.CheckProduce(batch(t, -1, -1, -1, 2, true), now); res.Err != nil {
		t.Fatalf("good batch: %v", res.Err)
	}

	// What the proposer checked is not checked again.
	res, a := st.ProduceChecked(keyless, now)
	if res.Err != nil || len(a.Batches) != 1 {
		t.Fatalf("ProduceChecked of a checked keyless batch: %+v", res)
	}
	st.Appended(&a, 1)
	// The header's limits and the sequence checks still apply.
	if res, _ := st.ProduceChecked(controlBatch(t), now); !errors.Is(res.Err, kerr.InvalidRecord) {
		t.Fatalf("ProduceChecked of a control batch: %v", res.Err)
	}
	res, a = st.ProduceChecked(batch(t, 9, 0, 0, 2, true), now)
	if res.Err != nil {
		t.Fatalf("ProduceChecked of an idempotent batch: %v", res.Err)
	}
	st.Appended(&a, 1)
	if res, _ := st.ProduceChecked(batch(t, 9, 0, 5, 1, true), now); !errors.Is(res.Err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("ProduceChecked of a sequence gap: %v", res.Err)
	}
	if res, _ := st.ProduceChecked([]byte{1, 2, 3}, now); !errors.Is(res.Err, kerr.CorruptMessage) {
		t.Fatalf("ProduceChecked of garbage: %v", res.Err)
	}
}

// controlBatch is a batch with the control bit a client may not set.
func controlBatch(t *testing.T) []byte {
	t.Helper()
	b, err := recordbatch.Build(recordbatch.Header{Attributes: recordbatch.AttrControl, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]recordbatch.Record{{Key: []byte{0, 0, 0, 0}, Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProduceKeepsFewHeaderCopies: the header copies a produce makes are
// reused by the next one, but a request of many batches leaves none of
// its size behind in the partition's state.
func TestProduceKeepsFewHeaderCopies(t *testing.T) {
	s := NewState(defaultConfig(t), 0, 0, 0)
	produce := func(n int) {
		t.Helper()
		var records []byte
		for range n {
			records = append(records, batch(t, -1, 0, 0, 1, true)...)
		}
		res, a := s.Produce(records, 1000)
		if res.Err != nil || len(a.Heads) != n {
			t.Fatalf("produce of %d batches: %v, %d heads", n, res.Err, len(a.Heads))
		}
		s.Appended(&a, n)
	}
	produce(2)
	if cap(s.headBytes) < 2*recordbatch.HeaderSize {
		t.Fatalf("a 2-batch produce kept %d bytes of header copies, want them kept for reuse", cap(s.headBytes))
	}
	produce(1000)
	if s.headBytes != nil || s.heads != nil {
		t.Fatalf("a 1000-batch produce left %d bytes of header copies in the state", cap(s.headBytes))
	}
	produce(3)
	if s.NextOffset() != 1005 {
		t.Fatalf("next offset %d, want 1005", s.NextOffset())
	}
}
