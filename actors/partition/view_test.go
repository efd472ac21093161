package partition

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// valueBatch is a batch of n records holding value; transactional when
// txn is set (pid < 0: a plain, non-idempotent batch).
func valueBatch(t *testing.T, pid int64, epoch int16, seq int32, n int, txn bool, value string) []byte {
	t.Helper()
	h := recordbatch.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, FirstTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().UnixMilli()}
	if pid < 0 {
		h.ProducerEpoch, h.BaseSequence = -1, -1
	}
	if txn {
		h.Attributes |= recordbatch.AttrTransactional
	}
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), Value: []byte(value), KeyNull: true}
	}
	b, err := recordbatch.Build(h, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readCommittedFetch serves what a read_committed fetch from offset
// serves, as protocol's fetch does it: batches below the view's last
// stable offset and the view's aborted transactions among them. A nil
// list stands in for the view's: the mixed case below passes another.
func readCommittedFetch(t *testing.T, read func(int64) ([]byte, error), v *ReadView, from int64) ([]byte, []AbortedTxn) {
	t.Helper()
	if from >= v.LastStable {
		return nil, nil
	}
	b, err := read(from)
	if err != nil {
		t.Fatalf("read at %d: %v", from, err)
	}
	pos, end := 0, from
	for pos+recordbatch.HeaderSize <= len(b) {
		h, err := recordbatch.ParseHeader(b[pos:])
		if err != nil || h.BaseOffset >= v.LastStable || pos+h.TotalSize() > len(b) {
			break
		}
		pos += h.TotalSize()
		end = h.LastOffset() + 1
	}
	return b[:pos], v.AbortedIn(from, end)
}

// consume plays Kafka's read_committed consumer over one fetch response:
// a producer's batches are dropped from the first offset of one of its
// listed aborted transactions up to its ABORT marker. It returns the
// values delivered, and the offset to fetch next.
func consume(t *testing.T, batches []byte, aborted []AbortedTxn, from int64) ([]string, int64) {
	t.Helper()
	ab := slices.Clone(aborted)
	slices.SortFunc(ab, func(a, b AbortedTxn) int { return int(a.FirstOffset - b.FirstOffset) })
	aborting := map[int64]bool{}
	var out []string
	next := from
	for len(batches) > 0 {
		h, err := recordbatch.ParseHeader(batches)
		if err != nil {
			t.Fatalf("batch at %d: %v", next, err)
		}
		b := batches[:h.TotalSize()]
		batches = batches[h.TotalSize():]
		next = h.LastOffset() + 1
		for len(ab) > 0 && ab[0].FirstOffset <= h.LastOffset() {
			aborting[ab[0].ProducerID] = true
			ab = ab[1:]
		}
		recs, err := recordbatch.Records(b)
		if err != nil {
			t.Fatalf("records at %d: %v", h.BaseOffset, err)
		}
		if h.IsControl() {
			if len(recs) > 0 && len(recs[0].Key) >= 4 && binary.BigEndian.Uint16(recs[0].Key[2:]) == markerAbort {
				delete(aborting, h.ProducerID)
			}
			continue
		}
		if h.IsTransactional() && aborting[h.ProducerID] {
			continue
		}
		for _, r := range recs {
			if h.BaseOffset+int64(r.OffsetDelta) >= from {
				out = append(out, string(r.Value))
			}
		}
	}
	return out, next
}

func memRead(lg *memLog) func(int64) ([]byte, error) {
	return func(off int64) ([]byte, error) { return lg.Read(off, 1<<20, false) }
}

// TestReadViewScript replays the interleaving behind issue 10: a fetch
// that took its last stable offset after an ABORT marker and its aborted
// list before it handed the aborted records out as committed. Each view
// is one moment, so a fetch served from one view never does; the aborted
// range starts at the transaction's first batch however many batches it
// has, and an abort with a bumped epoch still closes it.
func TestReadViewScript(t *testing.T) {
	lg := &memLog{}
	st, err := openStateLog(lg, defaultConfig(t), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	must := func(res ProduceResult) {
		t.Helper()
		if res.Err != nil {
			t.Fatalf("%v %s", res.Err, res.ErrMessage)
		}
	}
	mark := func(pid int64, epoch int16, commit bool, want int64) {
		t.Helper()
		if m := st.writeMarker(pid, epoch, commit, 0, now.UnixMilli()); m.Err != nil || m.Offset != want {
			t.Fatalf("marker pid %d: %+v, want offset %d", pid, m, want)
		}
	}
	must(st.produce(valueBatch(t, -1, -1, -1, 2, false, "plain"), now.UnixMilli()))  // 0-1
	must(st.produce(valueBatch(t, 10, 0, 0, 3, true, "aborted-A"), now.UnixMilli())) // 2-4
	must(st.produce(valueBatch(t, 11, 0, 0, 2, true, "committed-B"), now.UnixMilli()))
	before := st.st.View() // LSO 2: A and B open
	mark(10, 0, false, 7)
	mark(11, 0, true, 8)
	after := st.st.View()
	if before.LastStable != 2 || after.LastStable != 9 || after.HighWatermark != 9 {
		t.Fatalf("views: before %+v after %+v", before, after)
	}

	serve := func(v *ReadView, from int64) []string {
		b, ab := readCommittedFetch(t, memRead(lg), v, from)
		vals, _ := consume(t, b, ab, from)
		return vals
	}
	if got := serve(before, 0); !slices.Equal(got, []string{"plain", "plain"}) {
		t.Fatalf("fetch on the view before the markers: %q", got)
	}
	if got := serve(after, 0); !slices.Equal(got, []string{"plain", "plain", "committed-B", "committed-B"}) {
		t.Fatalf("fetch on the view after the markers: %q", got)
	}
	// The old publish stored the last stable offset, then the aborted
	// list: a fetch between the two stores read this mix.
	mixed := &ReadView{HighWatermark: after.HighWatermark, LastStable: after.LastStable, aborted: before.aborted}
	if got := serve(mixed, 0); !slices.Contains(got, "aborted-A") {
		t.Fatalf("the mixed view should leak A (that is the bug this guards): %q", got)
	}

	// A transaction over several batches, an unrelated batch in between,
	// aborted with a bumped epoch (a coordinator's timeout abort).
	must(st.produce(valueBatch(t, 12, 0, 0, 2, true, "aborted-C"), now.UnixMilli())) // 9-10
	must(st.produce(valueBatch(t, -1, -1, -1, 1, false, "plain"), now.UnixMilli()))  // 11
	must(st.produce(valueBatch(t, 12, 0, 2, 2, true, "aborted-C"), now.UnixMilli())) // 12-13
	if v := st.st.View(); v.LastStable != 9 {
		t.Fatalf("LSO with C open: %d, want 9", v.LastStable)
	}
	mark(12, 1, false, 14)
	final := st.st.View()
	if ab := final.AbortedIn(0, final.LastStable); len(ab) != 2 || ab[1] != (AbortedTxn{ProducerID: 12, FirstOffset: 9, LastOffset: 14}) {
		t.Fatalf("aborted: %+v", ab)
	}
	// From the start, and from inside C (a consumer taking the partition
	// over at a committed offset there): C never shows.
	for _, from := range []int64{0, 10, 12} {
		for _, v := range serve(final, from) {
			if v == "aborted-A" || v == "aborted-C" {
				t.Fatalf("fetch from %d delivered %q", from, v)
			}
		}
	}
}

// TestReadViewUnderConcurrentMarkers: fetches served from the actor's
// published views while it appends transactions and markers never
// deliver an aborted record, and every committed one arrives.
func TestReadViewUnderConcurrentMarkers(t *testing.T) {
	const (
		producers = 3
		rounds    = 300
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	p := openWith(t, quietSystem(t), nil)

	var done atomic.Bool
	var committed int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		seqs := make([]int32, producers)
		for range rounds {
			// Every producer opens a transaction, then they end in a
			// random order, so markers land while others are open.
			outcome := make([]bool, producers)
			for i := range producers {
				pid := int64(100 + i)
				outcome[i] = rng.IntN(5) >= 2 // 40 % aborted
				val := "aborted"
				if outcome[i] {
					val = "committed"
				}
				for range 1 + rng.IntN(2) {
					n := 1 + rng.IntN(3)
					if r := produceSync(t, p, valueBatch(t, pid, 0, seqs[i], n, true, val)); r.Err != nil {
						t.Errorf("produce: %v %s", r.Err, r.ErrMessage)
						return
					}
					seqs[i] += int32(n)
					if outcome[i] {
						committed += n
					}
				}
			}
			for _, i := range rng.Perm(producers) {
				if err := markerSync(t, p, int64(100+i), 0, outcome[i]); err != nil {
					t.Errorf("marker: %v", err)
					return
				}
			}
		}
	}()

	read := func(off int64) ([]byte, error) { return p.Read(off, 1<<20, false) }
	var next int64
	seen, fetches := 0, 0
	deadline := time.Now().Add(30 * time.Second)
	for {
		writerDone := done.Load() // before the view: the last pass sees all
		v := p.View()
		b, ab := readCommittedFetch(t, read, v, next)
		vals, n := consume(t, b, ab, next)
		fetches++
		for _, val := range vals {
			if val == "aborted" {
				t.Fatalf("fetch from %d (view %+v, aborted %v) delivered an aborted record", next, *v, ab)
			}
			seen++
		}
		if len(b) > 0 {
			next = n
		}
		if writerDone && next >= v.LastStable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reader at %d of %d after 30s", next, v.LastStable)
		}
	}
	wg.Wait()
	if seen != committed {
		t.Fatalf("delivered %d committed records, want %d", seen, committed)
	}
	t.Logf("%d fetches, %d committed records delivered", fetches, seen)
}
