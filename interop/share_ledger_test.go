package interop_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// shareDelivery is one delivery of a record to a share-group member, as the
// member printed it, and whether the broker confirmed its acknowledgement.
type shareDelivery struct {
	member    string
	count     int16  // the record's delivery count
	ack       string // ACCEPT, RELEASE or REJECT
	confirmed int8   // 1: commitSync answered ok; -1: answered an error; 0: no answer seen
	afterKill bool   // printed after the test killed a member
}

// shareLedger gathers every member's deliveries by record key.
type shareLedger struct {
	mu     sync.Mutex // guards the fields below; members' readers write, the test reads
	byKey  map[string][]*shareDelivery
	where  map[string][2]int64 // key -> partition, offset
	lines  map[string]int      // member -> deliveries printed
	bad    []string            // inconsistencies seen while parsing
	killed bool
}

func newShareLedger() *shareLedger {
	return &shareLedger{byKey: map[string][]*shareDelivery{}, where: map[string][2]int64{}, lines: map[string]int{}}
}

func (l *shareLedger) distinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byKey)
}

func (l *shareLedger) printed(member string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines[member]
}

func (l *shareLedger) markKilled() {
	l.mu.Lock()
	l.killed = true
	l.mu.Unlock()
}

// shareProc is one ShareMember.java process.
type shareProc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when its output has been read and it has exited
}

// startShareMember runs javaclients/ShareMember.java in group on topic,
// feeding its lines into l.
func startShareMember(t *testing.T, ctx context.Context, lib, addr, group, topic, name string, l *shareLedger) *shareProc {
	t.Helper()
	src, _ := filepath.Abs(filepath.Join("javaclients", "ShareMember.java"))
	log4j, _ := filepath.Abs(filepath.Join("..", "bench", "log4j2.properties"))
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-Dlog4j2.configurationFile="+log4j, "-cp", filepath.Join(lib, "*"), src, addr, group, topic, name)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &shareProc{name: name, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		pending := map[string][]*shareDelivery{} // partition -> deliveries awaiting commitSync's answer
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l.record(name, sc.Text(), pending)
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	return p
}

// record parses one line of member's output.
func (l *shareLedger) record(member, line string, pending map[string][]*shareDelivery) {
	f := strings.Fields(line)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case len(f) == 6 && f[0] == "R":
		part, _ := strconv.ParseInt(f[1], 10, 32)
		off, _ := strconv.ParseInt(f[2], 10, 64)
		dc, _ := strconv.ParseInt(f[3], 10, 16)
		key := f[5]
		if w, ok := l.where[key]; ok && w != [2]int64{part, off} {
			l.bad = append(l.bad, fmt.Sprintf("key %s at %d/%d and at %d/%d", key, w[0], w[1], part, off))
		}
		l.where[key] = [2]int64{part, off}
		d := &shareDelivery{member: member, count: int16(dc), ack: f[4], afterKill: l.killed}
		l.byKey[key] = append(l.byKey[key], d)
		pending[f[1]] = append(pending[f[1]], d)
		l.lines[member]++
	case len(f) == 3 && f[0] == "C":
		var v int8 = -1
		if f[2] == "ok" {
			v = 1
		}
		for p, ds := range pending {
			if f[1] != "*" && f[1] != p {
				continue
			}
			for _, d := range ds {
				d.confirmed = v
			}
			delete(pending, p)
		}
	}
}

// shareVerdict checks every record's deliveries against what its key asked
// for (see ShareMember.java) and returns the problems found and the number
// of delivery counts never printed (acquisitions by the killed member that
// it did not live to print).
//
// answersLost says a broker was killed too, so an acquisition's answer
// can be lost with it: then a release- record may be archived at the limit
// unseen after its first delivery. It takes two lost deliveries in a row:
// the killed member's connection closing gives its records back, a
// survivor's waiting fetch acquires them at once (durably, count 3 with a
// limit of 3), and the broker dies before answering; the new leader
// archives them. Without a broker killed, a survivor sees such a record's
// redelivery, and that is required.
func (l *shareLedger) shareVerdict(keys []string, limit int16, answersLost bool) (problems []string, gaps int, redelivered int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	problems = append(problems, l.bad...)
	for _, key := range keys {
		ds := append([]*shareDelivery(nil), l.byKey[key]...)
		if len(ds) == 0 {
			problems = append(problems, "lost: "+key+" never delivered")
			continue
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i].count < ds[j].count })
		if len(ds) > 1 {
			redelivered++
		}
		desc := func() string {
			var s []string
			for _, d := range ds {
				s = append(s, fmt.Sprintf("%s#%d:%s/%d", d.member, d.count, d.ack, d.confirmed))
			}
			w := l.where[key]
			return fmt.Sprintf("at %d/%d: %s", w[0], w[1], strings.Join(s, " "))
		}
		var maxCount int16
		for i, d := range ds {
			if d.count < 1 || d.count > limit {
				problems = append(problems, fmt.Sprintf("%s: delivery count %d outside 1..%d (%s)", key, d.count, limit, desc()))
			}
			if i > 0 && ds[i-1].count == d.count {
				problems = append(problems, fmt.Sprintf("%s: delivered twice with count %d, acquired by two members at once (%s)", key, d.count, desc()))
			}
			prev := int16(0)
			if i > 0 {
				prev = ds[i-1].count
			}
			if d.count > prev+1 {
				gaps += int(d.count - prev - 1)
			}
			maxCount = max(maxCount, d.count)
			terminal := d.ack == "ACCEPT" || d.ack == "REJECT" || d.count >= limit
			if terminal && d.confirmed == 1 && i < len(ds)-1 {
				problems = append(problems, fmt.Sprintf("%s: delivered again after a confirmed %s (%s)", key, d.ack, desc()))
			}
		}
		has := func(ack string, minCount int16) bool {
			for _, d := range ds {
				if d.ack == ack && d.count >= minCount {
					return true
				}
			}
			return false
		}
		switch {
		case strings.HasPrefix(key, "reject-"):
			if !has("REJECT", 1) {
				problems = append(problems, fmt.Sprintf("%s: never rejected (%s)", key, desc()))
			}
		case strings.HasPrefix(key, "release-"):
			switch {
			case has("ACCEPT", 2):
			case answersLost && maxCount < limit && !has("ACCEPT", 1):
				gaps += int(limit - maxCount) // archived at the limit unseen
			default:
				problems = append(problems, fmt.Sprintf("%s: not accepted on a redelivery (%s)", key, desc()))
			}
		case strings.HasPrefix(key, "poison-"):
			if maxCount < limit {
				// Its last acquisition went to the killed member, which
				// died before printing it; the broker archived it when that
				// lock ended (the test checks the start offset passed it).
				gaps += int(limit - maxCount)
			}
		default:
			if !has("ACCEPT", 1) {
				problems = append(problems, fmt.Sprintf("%s: never accepted (%s)", key, desc()))
			}
		}
	}
	return problems, gaps, redelivered
}

// countAfterKill is how many deliveries were printed after the kill.
func (l *shareLedger) countAfterKill() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ds := range l.byKey {
		for _, d := range ds {
			if d.afterKill {
				n++
			}
		}
	}
	return n
}

// deliver records one delivery seen by a Go (kgo) member; the caller sets
// its confirmation later with confirm.
func (l *shareLedger) deliver(member string, part int32, off int64, count int16, ack, key string) *shareDelivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w, ok := l.where[key]; ok && w != [2]int64{int64(part), off} {
		l.bad = append(l.bad, fmt.Sprintf("key %s at %d/%d and at %d/%d", key, w[0], w[1], part, off))
	}
	l.where[key] = [2]int64{int64(part), off}
	d := &shareDelivery{member: member, count: count, ack: ack, afterKill: l.killed}
	l.byKey[key] = append(l.byKey[key], d)
	l.lines[member]++
	return d
}

// confirm sets the broker's answer to ds's acknowledgements.
func (l *shareLedger) confirm(ds []*shareDelivery, v int8) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range ds {
		d.confirmed = v
	}
}

// unconfirmed is how many of member's deliveries never had their
// acknowledgement confirmed (for a killed member: what it held or had not
// yet committed when it died).
func (l *shareLedger) unconfirmed(member string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ds := range l.byKey {
		for _, d := range ds {
			if d.member == member && d.confirmed != 1 {
				n++
			}
		}
	}
	return n
}

// confirmedRecords is how many records have a delivery whose
// acknowledgement the broker confirmed.
func (l *shareLedger) confirmedRecords() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ds := range l.byKey {
		for _, d := range ds {
			if d.confirmed == 1 {
				n++
				break
			}
		}
	}
	return n
}
