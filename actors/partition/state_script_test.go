package partition

// Scripted tests of the pure partition state machine: testdata/*.txt hold
// commands, each followed by the lines it must print ("> ..."). Run with
// -rewrite to regenerate the expected lines after a deliberate change (and
// read the diff).
//
// The runner is the shell: it keeps the log in memory, writes each Append
// effect into it (checking the offsets the state decided), confirms it
// with Appended and moves the log start for DeleteRecords, as stateLog
// does on a storage.Log. Every line of output comes from the state or
// from the effects it returned.
//
// Commands (key=value arguments; the clock starts at 1000000 ms):
//
//	config [max-message-bytes=N] [log-append-time] [compact]
//	       [before-max-ms=N] [after-max-ms=N] [epoch=E]
//	                             a fresh machine over an empty log
//	produce [pid=P epoch=E seq=S] [n=N] [batches=K] [txn] [keys] [ts=MS]
//	        [ts-delta=MS] [control] [garbage]
//	                             one request of K batches of N records (a
//	                             producer's batches in sequence from S);
//	                             ts is the records' timestamp (default now)
//	marker pid=P epoch=E commit|abort [coord=C]
//	delete-records offset=O      a client's DeleteRecords (already resolved)
//	retain offset=O              retention's move, decided by the leader
//	fail-append [after=K]        the next Append: the log takes K batches
//	                             (default 0), then fails
//	advance ms=N                 move the clock
//	expire [expiration-ms=N]     an expiry pass at the clock (the leader's
//	                             partition.expire_producers command)
//	evict keep=N                 an eviction pass keeping N producers (the
//	                             leader's partition.evict_producers command)
//	aborted-in from=F to=T       the aborted transactions a fetch of [F, T)
//	                             reports
//	snapshot                     keep the producer snapshot as of now
//	restart [from-snapshot]      a new machine rebuilt from the log (from
//	                             the log start, or after the kept snapshot)
//	state                        print the machine's state

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/internal/scripttest"
	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/storage/recordbatch"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata expectations")

type stateScript struct {
	t        *testing.T
	st       *State
	cfg      logconfig.Config
	epoch    int32
	now      int64
	log      memLog // the shell's log: every batch appended, and the start
	failNext int    // >= 0: the next Append fails after this many batches
	snap     []byte // the kept producer snapshot
}

func TestStateScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runStateScript(t, f) })
	}
}

func runStateScript(t *testing.T, path string) {
	s := &stateScript{t: t, now: 1_000_000, failNext: -1}
	s.reset(defaultConfig(t), 0)
	scripttest.Run(t, path, *rewrite, func(cmd string) []string {
		got := s.run(cmd)
		s.checkInvariants(cmd)
		return got
	})
}

func (s *stateScript) reset(cfg logconfig.Config, epoch int32) {
	s.cfg, s.epoch = cfg, epoch
	s.log = memLog{}
	s.snap = nil
	s.st = NewState(cfg, epoch, 0, 0)
}

func (s *stateScript) run(cmd string) []string {
	name, args := scripttest.Args(cmd)
	has := func(k string) bool { _, ok := args[k]; return ok }
	num := func(k string, def int64) int64 {
		v, ok := args[k]
		if !ok {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			s.t.Fatalf("%q: %s: %v", cmd, k, err)
		}
		return n
	}
	switch name {
	case "config":
		cfg := defaultConfig(s.t)
		cfg.MaxMessageBytes = int32(num("max-message-bytes", int64(cfg.MaxMessageBytes)))
		cfg.LogAppendTime = has("log-append-time")
		cfg.CleanupCompact = has("compact")
		cfg.MessageTimestampBeforeMaxMs = num("before-max-ms", cfg.MessageTimestampBeforeMaxMs)
		cfg.MessageTimestampAfterMaxMs = num("after-max-ms", cfg.MessageTimestampAfterMaxMs)
		s.reset(cfg, int32(num("epoch", 0)))
		return []string{s.describe()}
	case "produce":
		recs := s.records(args, has, num)
		res, a := s.st.Produce(recs, s.now)
		var out []string
		if len(a.Batches) > 0 {
			out = s.perform(&a)
			if s.failed(out) {
				res.Err = kerr.KafkaStorageError
				if a.Base == s.st.NextOffset() { // nothing taken
					res.BaseOffset = -1
				}
			}
		}
		return append([]string{formatProduce(res)}, out...)
	case "marker":
		if !has("commit") && !has("abort") {
			s.t.Fatalf("%q: commit or abort", cmd)
		}
		res, a := s.st.WriteMarker(num("pid", -1), int16(num("epoch", 0)), has("commit"), int32(num("coord", 0)), s.now)
		var out []string
		if len(a.Batches) > 0 {
			out = s.perform(&a)
			if s.failed(out) {
				res = MarkerResult{Err: kerr.KafkaStorageError, Offset: -1}
			}
		}
		head := fmt.Sprintf("ok offset=%d", res.Offset)
		if res.Err != nil {
			head = fmt.Sprintf("err %s offset=%d", errName(res.Err), res.Offset)
		}
		return append([]string{head}, out...)
	case "delete-records", "retain":
		res, moveTo := s.st.DeleteRecords(num("offset", -2))
		var out []string
		if moveTo >= 0 {
			out = append(out, fmt.Sprintf("effect move-start %d", moveTo))
			if err := s.log.DeleteRecordsBefore(moveTo); err != nil {
				s.t.Fatalf("%q: %v", cmd, err)
			}
			s.st.StartMoved(s.log.StartOffset())
		}
		head := fmt.Sprintf("ok low-watermark=%d", res.lowWatermark)
		if res.err != nil {
			head = fmt.Sprintf("err %s low-watermark=%d", errName(res.err), res.lowWatermark)
		}
		return append([]string{head}, out...)
	case "fail-append":
		s.failNext = int(num("after", 0))
		return nil
	case "advance":
		s.now += num("ms", 0)
		return []string{fmt.Sprintf("now=%d", s.now)}
	case "expire":
		ms := num("expiration-ms", 0)
		due := s.st.ExpiryDue(s.now, ms)
		n := s.st.ExpireProducers(s.now, ms)
		return []string{fmt.Sprintf("due=%v expired=%d", due, n)}
	case "evict":
		n := s.st.EvictProducers(int(num("keep", 0)))
		return []string{fmt.Sprintf("evicted=%d producers=%d", n, s.st.ProducerCount())}
	case "aborted-in":
		var parts []string
		for _, a := range s.st.View().AbortedIn(num("from", 0), num("to", 0)) {
			parts = append(parts, fmt.Sprintf("p%d:%d-%d", a.ProducerID, a.FirstOffset, a.LastOffset))
		}
		return []string{"aborted-in " + strings.Join(parts, ",")}
	case "snapshot":
		s.snap = s.st.encodeSnapshot()
		return []string{fmt.Sprintf("snapshot offset=%d", s.st.NextOffset())}
	case "restart":
		st := NewState(s.cfg, s.epoch, s.log.StartOffset(), s.log.NextOffset())
		from := st.StartOffset()
		if has("from-snapshot") {
			off, ok := st.restoreSnapshot(s.snap)
			if s.snap == nil || !ok {
				return []string{"snapshot refused"}
			}
			from = off
		}
		if err := replayLog(st, &s.log, from); err != nil {
			return []string{"err " + err.Error()}
		}
		s.st = st
		return []string{fmt.Sprintf("replayed from %d", from), s.describe()}
	case "state":
		return []string{s.describe()}
	default:
		s.t.Fatalf("unknown command %q", cmd)
	}
	return nil
}

// records builds one produce request's records field.
func (s *stateScript) records(args map[string]string, has func(string) bool, num func(string, int64) int64) []byte {
	if has("garbage") {
		return []byte{1, 2, 3}
	}
	pid := num("pid", -1)
	n := int(num("n", 1))
	ts := num("ts", s.now)
	h := recordbatch.Header{ProducerID: pid, ProducerEpoch: int16(num("epoch", 0)), BaseSequence: int32(num("seq", 0)), FirstTimestamp: ts, MaxTimestamp: ts + num("ts-delta", 0)}
	if pid < 0 {
		h.ProducerEpoch, h.BaseSequence = -1, -1
	}
	if has("txn") {
		h.Attributes |= recordbatch.AttrTransactional
	}
	if has("control") {
		h.Attributes |= recordbatch.AttrControl | recordbatch.AttrTransactional
	}
	var out []byte
	for range num("batches", 1) {
		recs := make([]recordbatch.Record, n)
		for i := range recs {
			recs[i] = recordbatch.Record{OffsetDelta: int32(i), TimestampDelta: h.MaxTimestamp - h.FirstTimestamp, Value: []byte("v"), KeyNull: !has("keys")}
			if has("keys") {
				recs[i].Key = []byte{byte(i)}
			}
		}
		b, err := recordbatch.Build(h, recs)
		if err != nil {
			s.t.Fatal(err)
		}
		out = append(out, b...)
		if pid >= 0 {
			h.BaseSequence += int32(n)
		}
	}
	return out
}

// perform is the shell's half of an Append: write the batches (checking
// the offsets the state decided), then confirm what the log took. It
// prints the effect and each batch as written.
func (s *stateScript) perform(a *Append) []string {
	out := []string{fmt.Sprintf("effect append base=%d batches=%d now=%d", a.Base, len(a.Batches), a.NowMs)}
	if a.Base != s.log.NextOffset() {
		s.t.Fatalf("append at %d, log end %d", a.Base, s.log.NextOffset())
	}
	n := len(a.Batches)
	if s.failNext >= 0 {
		n = min(n, s.failNext)
		s.failNext = -1
	}
	for i, b := range a.Batches[:n] {
		if a.Heads != nil {
			b = patchedBatch(a.Heads[i], b)
		}
		h, err := recordbatch.Validate(b) // the patched batch's CRC holds
		if err != nil {
			s.t.Fatalf("patched batch %d: %v", i, err)
		}
		want := h.BaseOffset
		base, _, err := s.log.AppendAt(b, a.NowMs)
		if err != nil || base != want {
			s.t.Fatalf("memLog append at %d: %v (state decided %d)", base, err, want)
		}
		line := fmt.Sprintf("  %d-%d leader-epoch=%d", h.BaseOffset, h.LastOffset(), h.PartitionLeaderEpoch)
		if h.TimestampType() == 1 {
			line += fmt.Sprintf(" log-append-time=%d", h.MaxTimestamp)
		}
		if h.IsControl() {
			line += " control"
		}
		out = append(out, line)
	}
	if n < len(a.Batches) {
		out = append(out, fmt.Sprintf("  storage error after %d of %d batches", n, len(a.Batches)))
	}
	s.st.Appended(a, n)
	return out
}

func (s *stateScript) failed(out []string) bool {
	return strings.HasPrefix(out[len(out)-1], "  storage error")
}

func formatProduce(res ProduceResult) string {
	var b strings.Builder
	if res.Err != nil {
		fmt.Fprintf(&b, "err %s", errName(res.Err))
	} else {
		b.WriteString("ok")
	}
	fmt.Fprintf(&b, " base=%d log-append-time=%d log-start=%d", res.BaseOffset, res.LogAppendTime, res.LogStartOffset)
	if res.Err != nil && res.ErrMessage != "" {
		fmt.Fprintf(&b, " msg=%q", res.ErrMessage)
	}
	for _, re := range res.RecordErrors {
		fmt.Fprintf(&b, " record-error=%d", re.BatchIndex)
	}
	return b.String()
}

func (s *stateScript) describe() string {
	st := s.st
	v := st.View()
	var b strings.Builder
	fmt.Fprintf(&b, "state start=%d next=%d hw=%d lso=%d", st.StartOffset(), st.NextOffset(), v.HighWatermark, v.LastStable)
	if ab := st.Aborted(); len(ab) > 0 {
		var parts []string
		for _, a := range ab {
			parts = append(parts, fmt.Sprintf("p%d:%d-%d", a.ProducerID, a.FirstOffset, a.LastOffset))
		}
		fmt.Fprintf(&b, " aborted=%s", strings.Join(parts, ","))
	}
	pids := make([]int64, 0, st.producers.len())
	st.producers.each(func(e *producerEntry) { pids = append(pids, e.pid) })
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	for _, pid := range pids {
		e := st.producers.get(pid)
		fmt.Fprintf(&b, " p%d[epoch=%d", pid, e.epoch)
		var bs []string
		for _, m := range e.tracked() {
			bs = append(bs, fmt.Sprintf("%d-%d@%d", m.firstSeq, m.lastSeq, m.firstOffset))
		}
		if len(bs) > 0 {
			fmt.Fprintf(&b, " seqs=%s", strings.Join(bs, ","))
		}
		if e.txnFirstOffset >= 0 {
			fmt.Fprintf(&b, " txn-from=%d", e.txnFirstOffset)
		}
		// Neither -1 (no marker yet) nor a first coordinator's 0 is shown.
		if e.coordinatorEpoch > 0 {
			fmt.Fprintf(&b, " coord=%d", e.coordinatorEpoch)
		}
		b.WriteString("]")
	}
	return b.String()
}

// checkInvariants asserts what State's comments promise after every
// command: the log and the state agree on the ends, the view shows the
// state, the last stable offset is the oldest open transaction's start,
// and the aborted list is in marker order.
func (s *stateScript) checkInvariants(cmd string) {
	t, st := s.t, s.st
	t.Helper()
	if st.NextOffset() != s.log.NextOffset() || st.StartOffset() != s.log.StartOffset() {
		t.Errorf("after %q: state [%d, %d), log [%d, %d)", cmd, st.StartOffset(), st.NextOffset(), s.log.StartOffset(), s.log.NextOffset())
	}
	v := st.View()
	if v.HighWatermark != st.NextOffset() || v.LastStable > v.HighWatermark {
		t.Errorf("after %q: view hw=%d lso=%d, next %d", cmd, v.HighWatermark, v.LastStable, st.NextOffset())
	}
	lso := st.NextOffset()
	for _, o := range st.OpenTxns() {
		lso = min(lso, o.FirstOffset)
	}
	if v.LastStable != lso {
		t.Errorf("after %q: lso %d, oldest open transaction at %d", cmd, v.LastStable, lso)
	}
	// Every producer without an open transaction is in the expiry bucket
	// of its last timestamp; the open list holds exactly those with one,
	// by first offset.
	open := 0
	st.producers.each(func(e *producerEntry) {
		if e.txnFirstOffset < 0 && (!e.inBucket || e.bucket != bucketOf(e.lastTimestamp)) {
			t.Errorf("after %q: producer %d not in its expiry bucket", cmd, e.pid)
		}
		if e.txnFirstOffset >= 0 {
			open++
		}
	})
	prev := int64(-1)
	for r := st.openHead; r != 0; r = st.producers.slab.at(r).txnNext {
		e := st.producers.slab.at(r)
		if e.txnFirstOffset <= prev {
			t.Errorf("after %q: open list out of order at producer %d", cmd, e.pid)
		}
		prev = e.txnFirstOffset
		open--
	}
	if open != 0 {
		t.Errorf("after %q: open list and producers disagree by %d", cmd, open)
	}
	ab := st.Aborted()
	for i := range ab {
		if ab[i].FirstOffset > ab[i].LastOffset || (i > 0 && ab[i-1].LastOffset >= ab[i].LastOffset) {
			t.Errorf("after %q: aborted list out of order: %+v", cmd, ab)
		}
	}
}

func errName(err error) string {
	if err == nil {
		return "none"
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}
