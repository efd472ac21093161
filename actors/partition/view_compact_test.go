package partition

import (
	"encoding/binary"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// consumeReadCommitted reads batches as Kafka's consumer does with
// read_committed and the fetch response's aborted list: a producer listed
// with a first offset at or below a batch's last offset has its
// transactional batches skipped until its ABORT marker. Returns key=value
// of what it delivers.
func consumeReadCommitted(t *testing.T, raw []byte, aborted []AbortedTxn) []string {
	t.Helper()
	queue := slices.Clone(aborted)
	sort.Slice(queue, func(i, j int) bool { return queue[i].FirstOffset < queue[j].FirstOffset })
	bs, err := recordbatch.Split(raw)
	if err != nil {
		t.Fatal(err)
	}
	skipping := map[int64]bool{}
	var out []string
	for _, b := range bs {
		h, _ := recordbatch.ParseHeader(b)
		for len(queue) > 0 && queue[0].FirstOffset <= h.LastOffset() {
			skipping[queue[0].ProducerID] = true
			queue = queue[1:]
		}
		recs, err := recordbatch.Records(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.IsControl() {
			if len(recs) > 0 && len(recs[0].Key) >= 4 && binary.BigEndian.Uint16(recs[0].Key[2:]) == markerAbort {
				delete(skipping, h.ProducerID)
			}
			continue
		}
		if h.IsTransactional() && skipping[h.ProducerID] {
			continue
		}
		for _, r := range recs {
			out = append(out, string(r.Key)+"="+string(r.Value))
		}
	}
	return out
}

// fetchReadCommitted fetches the whole log below v's last stable offset
// as the Fetch handler does on the zero-copy path: v taken first, then
// file ranges, cut at the last stable offset, each answered with the
// aborted transactions of its span (AbortedInRead). ranges, when given,
// are ranges taken earlier (a fetch whose range is sent after a pass); it
// releases them.
func fetchReadCommitted(t *testing.T, lg *storage.Log, v *ReadView, ranges []*storage.FileRange) []string {
	t.Helper()
	var out []string
	answer := func(fr *storage.FileRange, from int64) int64 {
		defer fr.Release()
		end := fr.CutBefore(v.LastStable)
		if end < 0 {
			return -1
		}
		raw, err := fr.AppendTo(nil)
		if err != nil {
			t.Fatalf("file range at %d: %v", from, err)
		}
		out = append(out, consumeReadCommitted(t, raw, v.AbortedInRead(from, end, SpansHold(fr.Batches())))...)
		return end
	}
	if ranges != nil {
		for _, fr := range ranges {
			answer(fr, fr.Batches()[0].BaseOffset)
		}
		return out
	}
	for off := lg.StartOffset(); off < v.LastStable; {
		fr, err := lg.ReadRange(off, 1<<20, false)
		if err != nil {
			t.Fatalf("read range at %d: %v", off, err)
		}
		if fr == nil {
			break
		}
		end := answer(fr, off)
		if end < 0 {
			break
		}
		off = end
	}
	return out
}

// checkDelivery fails unless got holds the committed record and no
// aborted one.
func checkDelivery(t *testing.T, what string, got []string) {
	t.Helper()
	if !slices.Contains(got, "z=committed") {
		t.Fatalf("%s: read_committed misses the producer's committed record: %v", what, got)
	}
	for _, r := range got {
		if r == "x=aborted" || r == "y=aborted" {
			t.Fatalf("%s: read_committed delivers aborted %s", what, r)
		}
	}
}

// TestFetchViewAcrossAbortCleanup: the ABORT marker of an aborted
// transaction is cleaned in three passes (stamp, forget, drop). A fetch
// takes its view, then reads the log; any number of passes may run in
// between (the read is on the handler's goroutine, the passes on the
// actor). Every pair is checked: a view published before pass i, read
// after pass j >= i (a range read then, or a file range taken right after
// the view and sent after the passes). The consumer must get the
// producer's later committed transaction and no aborted record.
//
// The published view (what the Fetch handler reads) must also follow each
// pass: with the single-node replicator a pass is applied inside Propose,
// where no answer publishes the state, so a view listing a forgotten
// transaction stayed published after the marker went.
func TestFetchViewAcrossAbortCleanup(t *testing.T) {
	local := cluster.NewLocal()
	a := compactActor(t, 700, local)
	local.Register(a.key, a)
	a.sl.snapshotPath = filepath.Join(t.TempDir(), producerSnapshotFile)
	w := &txnWriter{t: t, a: a, now: time.Now().UnixMilli(), seq: map[int64]int32{}}
	const p = 2
	w.data(p, "x", "aborted", "y", "aborted")
	abort := w.marker(p, false)
	w.data(p, "z", "committed")
	w.marker(p, true)
	produceKeyed(t, 0, 150, a)
	a.publish() // as the produce's answer does

	type taken struct {
		v      *ReadView
		ranges []*storage.FileRange
	}
	var views []taken
	take := func() {
		v := a.p.View()
		var rs []*storage.FileRange
		for off := a.p.log.StartOffset(); off < v.LastStable; {
			fr, err := a.p.log.ReadRange(off, 1<<20, false)
			if err != nil || fr == nil {
				t.Fatalf("read range at %d: %v", off, err)
			}
			rs = append(rs, fr)
			off = fr.Batches()[len(fr.Batches())-1].LastOffset + 1
		}
		views = append(views, taken{v, rs})
	}
	dropped := false
	for pass := 0; pass < 10 && !dropped; pass++ {
		take()
		maintainOnce(t, a)
		_, dropped = batchesOf(t, a.p.log)[abort]
		dropped = !dropped
		pub := a.p.View()
		if listed := len(pub.AbortedIn(0, pub.LastStable)) > 0; dropped && listed {
			t.Fatalf("pass %d: the published view lists the aborted transaction after its marker was dropped", pass)
		}
		for i, tk := range views {
			checkDelivery(t, "view before pass "+strconv.Itoa(i)+", read after pass "+strconv.Itoa(pass), fetchReadCommitted(t, a.p.log, tk.v, nil))
		}
		checkDelivery(t, "view after pass "+strconv.Itoa(pass), fetchReadCommitted(t, a.p.log, pub, nil))
	}
	if !dropped {
		t.Fatal("ABORT marker still in the log after 10 passes")
	}
	// The oldest view lists the transaction whose marker is gone: without
	// AbortedInRead the consumer would skip the producer's next,
	// committed, transaction.
	if old := views[0].v; len(old.AbortedIn(0, old.LastStable)) == 0 {
		t.Fatal("the first view does not list the aborted transaction: the test lost its point")
	}
	for i, tk := range views {
		checkDelivery(t, "file range taken before pass "+strconv.Itoa(i)+", sent after the last", fetchReadCommitted(t, a.p.log, tk.v, tk.ranges))
	}
}
