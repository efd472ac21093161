package txn

// Scripted tests of the pure state machine: testdata/*.txt hold commands,
// each followed by the lines it must print ("> ..."). Run with -rewrite to
// regenerate the expected lines after a deliberate change (and read the
// diff).
//
// Commands (key=value arguments; a step's Next is adopted at once, as
// after a successful write):
//
//	init timeout=MS [pid=P epoch=E]      transactional InitProducerId
//	add pid= epoch= [parts=t-0,t-1] [groups=g1,g2] [tv2]
//	verify pid= epoch= parts=t-0,...
//	produce pid= epoch= parts=t-0 [tv2]  a transactional batch's check (tv2: Produce v12+, implicit add)
//	group pid= epoch= group=g            TxnOffsetCommit v0-4 check
//	end pid= epoch= commit|abort [tv2]
//	timeout epoch=E                      the deadline timer firing
//	markers                              every marker written
//	expire                               the expiry timer firing
//	evict [last=MS]                      the budget expiring the id early, as picked when last updated at MS (default: its current last update)
//	advance ms=N                         move the clock
//	fail-alloc                           the next allocation fails
//	set-epoch epoch=E                    overwrite the epoch (fast-forward)

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/internal/scripttest"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata expectations")

type script struct {
	t         *testing.T
	cur       *Txn
	now       int64
	nextPID   int64
	failAlloc bool
	cfg       Config
}

func (s *script) alloc() (int64, error) {
	if s.failAlloc {
		s.failAlloc = false
		return -1, errors.New("allocator down")
	}
	s.nextPID++
	return s.nextPID, nil
}

func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScript(t, f) })
	}
}

func runScript(t *testing.T, path string) {
	s := &script{t: t, now: 1000, nextPID: 999, cfg: Config{MaxTimeoutMs: 900_000, IDExpirationMs: 604_800_000}}
	scripttest.Run(t, path, *rewrite, func(cmd string) []string {
		return s.run(cmd)
	})
}

func (s *script) run(cmd string) []string {
	name, args := scripttest.Args(cmd)
	num := func(k string) int64 {
		v, ok := args[k]
		if !ok {
			s.t.Fatalf("%q: missing %s=", cmd, k)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			s.t.Fatalf("%q: %s: %v", cmd, k, err)
		}
		return n
	}
	_, tv2 := args["tv2"]
	var st Step
	switch name {
	case "init":
		in := InitInput{ID: "tx", TimeoutMs: int32(num("timeout"))}
		if _, ok := args["pid"]; ok {
			in.Expected = &ProducerIDAndEpoch{ProducerID: num("pid"), Epoch: int16(num("epoch"))}
		}
		st = InitProducerID(s.cur, in, s.now, s.cfg, s.alloc)
	case "add":
		st = Add(s.cur, AddInput{ProducerID: num("pid"), Epoch: int16(num("epoch")), Partitions: parseParts(args["parts"]), Groups: parseList(args["groups"]), TV2: tv2}, s.now)
	case "verify":
		per, err := VerifyPartitions(s.cur, num("pid"), int16(num("epoch")), parseParts(args["parts"]))
		if err != nil {
			return []string{"err " + errName(err)}
		}
		var b []string
		for _, e := range per {
			b = append(b, errName(e))
		}
		return []string{"per-partition " + strings.Join(b, ",")}
	case "produce":
		st = AppendCheck(s.cur, AddInput{ProducerID: num("pid"), Epoch: int16(num("epoch")), Partitions: parseParts(args["parts"])}, tv2, s.now)
	case "group":
		return []string{"err " + errName(VerifyGroup(s.cur, num("pid"), int16(num("epoch")), args["group"]))}
	case "end":
		_, commit := args["commit"]
		st = EndTxn(s.cur, EndInput{ProducerID: num("pid"), Epoch: int16(num("epoch")), Commit: commit, TV2: tv2}, s.now, s.alloc)
	case "timeout":
		st = Timeout(s.cur, int16(num("epoch")), s.now)
	case "markers":
		st = MarkersWritten(s.cur, s.now)
	case "expire":
		st = Expire(s.cur, s.now, s.cfg)
	case "evict":
		last := int64(-1)
		if s.cur != nil {
			last = s.cur.LastUpdateMs
		}
		if _, ok := args["last"]; ok {
			last = num("last")
		}
		st = Evict(s.cur, last)
	case "advance":
		s.now += num("ms")
		return []string{fmt.Sprintf("now=%d", s.now)}
	case "set-epoch":
		// Fast-forward (a test shortcut, not a step).
		s.cur.ProducerEpoch = int16(num("epoch"))
		return []string{"state " + formatTxn(s.cur)}
	case "fail-alloc":
		s.failAlloc = true
		return nil
	default:
		s.t.Fatalf("unknown command %q", cmd)
	}
	return s.describe(st)
}

func (s *script) describe(st Step) []string {
	var b strings.Builder
	if st.Err != nil {
		b.WriteString("err " + errName(st.Err))
	} else {
		fmt.Fprintf(&b, "ok pid=%d epoch=%d", st.ProducerID, st.ProducerEpoch)
	}
	if st.AwaitMarkers {
		b.WriteString(" await-markers")
	}
	if st.Next == nil {
		b.WriteString(" (unchanged)")
		return []string{b.String()}
	}
	checkInvariants(s.t, st.Next)
	s.cur = st.Next
	lines := []string{b.String(), "state " + formatTxn(s.cur)}
	if m := s.cur.PendingMarkers(); m != nil {
		kind := "abort"
		if m.Commit {
			kind = "commit"
		}
		lines = append(lines, fmt.Sprintf("markers %s pid=%d epoch=%d parts=%s groups=%s", kind, m.ProducerID, m.ProducerEpoch, formatParts(m.Partitions), strings.Join(m.Groups, ",")))
	}
	return lines
}

func formatTxn(t *Txn) string {
	s := fmt.Sprintf("%s pid=%d epoch=%d last=%d/%d", t.State, t.ProducerID, t.ProducerEpoch, t.LastProducerID, t.LastProducerEpoch)
	if t.NextProducerID >= 0 {
		s += fmt.Sprintf(" next=%d", t.NextProducerID)
	}
	s += fmt.Sprintf(" timeout=%d start=%d", t.TimeoutMs, t.StartMs)
	if len(t.Partitions) > 0 {
		s += " parts=" + formatParts(t.Partitions)
	}
	if len(t.Groups) > 0 {
		s += " groups=" + strings.Join(t.Groups, ",")
	}
	if t.TV2 {
		s += " tv2"
	}
	if _, at, ok := t.Deadline(); ok {
		s += fmt.Sprintf(" deadline=%d", at)
	}
	return s
}

// checkInvariants asserts what state.go's Txn comment promises.
func checkInvariants(t *testing.T, x *Txn) {
	t.Helper()
	open := x.State == StateOngoing || x.State.preparing()
	if !open && (len(x.Partitions) > 0 || len(x.Groups) > 0) {
		t.Errorf("invariant: %s holds partitions or groups: %s", x.State, formatTxn(x))
	}
	if open && x.StartMs < 0 {
		t.Errorf("invariant: open transaction without a start: %s", formatTxn(x))
	}
	if x.NextProducerID >= 0 && !(x.State.preparing() && x.TV2) {
		t.Errorf("invariant: next producer id outside a TV2 prepare: %s", formatTxn(x))
	}
	for i := 1; i < len(x.Partitions); i++ {
		if x.Partitions[i-1].less(x.Partitions[i]) >= 0 {
			t.Errorf("invariant: partitions not sorted and unique: %s", formatTxn(x))
		}
	}
	if x.State != StateDead {
		v, err := encodeTxn(x)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		back, err := decodeTxn(x.ID, v)
		if err != nil || formatTxn(back) != formatTxn(x) {
			t.Errorf("record round trip: %v\n%s\n%s", err, formatTxn(x), formatTxn(back))
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

func parseList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func parseParts(v string) []TopicPartition {
	var out []TopicPartition
	for _, p := range parseList(v) {
		i := strings.LastIndexByte(p, '-')
		n, _ := strconv.Atoi(p[i+1:])
		out = append(out, TopicPartition{Topic: p[:i], Partition: int32(n)})
	}
	return out
}

func formatParts(ps []TopicPartition) string {
	var b []string
	for _, p := range ps {
		b = append(b, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
	}
	return strings.Join(b, ",")
}
