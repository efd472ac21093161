package group

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// streamsAssignTestMembers makes members named m0, m1, ... on the given
// processes (procs[i] is member i's process).
func streamsAssignTestMembers(procs ...string) []streamsAssignMember {
	var out []streamsAssignMember
	for i, p := range procs {
		out = append(out, streamsAssignMember{id: fmt.Sprintf("m%d", i), processID: p})
	}
	return out
}

// streamsAssignTestFeed returns in with every member's previous tasks set
// to its target in out, as the group would hold once it converged.
func streamsAssignTestFeed(in streamsAssignInput, out map[string]streamsTarget) streamsAssignInput {
	in.members = slices.Clone(in.members)
	for i := range in.members {
		tg := out[in.members[i].id]
		in.members[i].prevActive = tg.active.clone()
		in.members[i].prevStandby = tg.standby.clone()
	}
	return in
}

// streamsAssignTestCheck checks the invariants every assignment keeps:
// an entry per member; every task active exactly once; standbys only of
// stateful tasks, min(replicas, processes-1) of each, no two copies of a
// task in one process.
func streamsAssignTestCheck(t *testing.T, in streamsAssignInput, out map[string]streamsTarget) {
	t.Helper()
	if len(out) != len(in.members) {
		t.Fatalf("%d targets for %d members", len(out), len(in.members))
	}
	proc := map[string]string{}
	procs := map[string]bool{}
	for _, m := range in.members {
		if _, ok := out[m.id]; !ok {
			t.Fatalf("no target for %s", m.id)
		}
		proc[m.id] = m.processID
		procs[m.processID] = true
	}
	type task struct {
		sub string
		p   int32
	}
	actives := map[task]string{}
	copies := map[task]map[string]bool{} // processes holding a copy
	standbys := map[task]int{}
	hold := func(tk task, member string) {
		if copies[tk] == nil {
			copies[tk] = map[string]bool{}
		}
		if copies[tk][proc[member]] {
			t.Fatalf("task %v twice in process %s", tk, proc[member])
		}
		copies[tk][proc[member]] = true
	}
	for id, tg := range out {
		for sub, ps := range tg.active {
			if !slices.IsSorted(ps) || len(slices.Compact(slices.Clone(ps))) != len(ps) || len(ps) == 0 {
				t.Fatalf("%s: active %s not sorted and unique and non-empty: %v", id, sub, ps)
			}
			for _, p := range ps {
				if p < 0 || p >= in.tasks[sub] {
					t.Fatalf("%s: active task %s_%d not in the topology", id, sub, p)
				}
				tk := task{sub, p}
				if prev, ok := actives[tk]; ok {
					t.Fatalf("task %v active on %s and %s", tk, prev, id)
				}
				actives[tk] = id
				hold(tk, id)
			}
		}
	}
	for id, tg := range out {
		for sub, ps := range tg.standby {
			if !slices.IsSorted(ps) || len(slices.Compact(slices.Clone(ps))) != len(ps) || len(ps) == 0 {
				t.Fatalf("%s: standby %s not sorted and unique and non-empty: %v", id, sub, ps)
			}
			if !in.stateful[sub] {
				t.Fatalf("%s: standby of stateless subtopology %s", id, sub)
			}
			for _, p := range ps {
				if p < 0 || p >= in.tasks[sub] {
					t.Fatalf("%s: standby task %s_%d not in the topology", id, sub, p)
				}
				tk := task{sub, p}
				standbys[tk]++
				hold(tk, id)
			}
		}
	}
	want := min(in.numStandbyReplicas, len(procs)-1)
	for sub, n := range in.tasks {
		for p := range n {
			tk := task{sub, p}
			if _, ok := actives[tk]; !ok {
				t.Fatalf("task %v not assigned", tk)
			}
			if in.stateful[sub] && standbys[tk] != want {
				t.Fatalf("task %v has %d standbys, want %d", tk, standbys[tk], want)
			}
		}
	}
	if len(actives) != streamsAssignTestTotal(in.tasks) {
		t.Fatalf("%d tasks active, want %d", len(actives), streamsAssignTestTotal(in.tasks))
	}
}

func streamsAssignTestTotal(tasks map[string]int32) int {
	n := 0
	for _, c := range tasks {
		n += int(c)
	}
	return n
}

// streamsAssignTestSpread returns the least and most active tasks of a
// member.
func streamsAssignTestSpread(out map[string]streamsTarget) (lo, hi int) {
	lo = -1
	for _, tg := range out {
		n := tg.active.count()
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return lo, hi
}

func TestStreamsAssignEmpty(t *testing.T) {
	if out := assignStreamsTasks(streamsAssignInput{tasks: map[string]int32{"a": 3}}); len(out) != 0 {
		t.Fatalf("no members: got %v", out)
	}
	in := streamsAssignInput{
		members:            streamsAssignTestMembers("p0", "p1"),
		tasks:              map[string]int32{"gone": 0},
		stateful:           map[string]bool{"gone": true},
		numStandbyReplicas: 1,
	}
	in.members[0].prevActive = streamsTasks{"gone": {0, 1}}
	out := assignStreamsTasks(in)
	if len(out) != 2 {
		t.Fatalf("zero tasks: got %v", out)
	}
	for id, tg := range out {
		if tg.active.count() != 0 || tg.standby.count() != 0 {
			t.Fatalf("zero tasks: %s got %+v", id, tg)
		}
	}
}

func TestStreamsAssignFreshBalance(t *testing.T) {
	for _, tc := range []struct {
		name  string
		procs []string
		tasks map[string]int32
		want  map[string]int // active tasks per member, if exact
	}{
		{"3 processes", []string{"p0", "p1", "p2"}, map[string]int32{"a": 12}, map[string]int{"m0": 4, "m1": 4, "m2": 4}},
		{"2 subtopologies", []string{"p0", "p1", "p2"}, map[string]int32{"a": 6, "b": 6}, map[string]int{"m0": 4, "m1": 4, "m2": 4}},
		{"processes of 1 and 2", []string{"p0", "p1", "p1"}, map[string]int32{"a": 12}, map[string]int{"m0": 4, "m1": 4, "m2": 4}},
		{"processes of 1 and 3", []string{"p1", "p0", "p1", "p1"}, map[string]int32{"a": 5, "b": 3}, map[string]int{"m0": 2, "m1": 2, "m2": 2, "m3": 2}},
		{"uneven", []string{"p0", "p1", "p1"}, map[string]int32{"a": 7, "b": 3}, nil},
		{"fewer tasks than members", []string{"p0", "p0", "p1", "p2", "p2"}, map[string]int32{"a": 2, "b": 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := streamsAssignInput{members: streamsAssignTestMembers(tc.procs...), tasks: tc.tasks}
			out := assignStreamsTasks(in)
			streamsAssignTestCheck(t, in, out)
			if lo, hi := streamsAssignTestSpread(out); hi-lo > 1 {
				t.Fatalf("active tasks per member range %d..%d", lo, hi)
			}
			for id, n := range tc.want {
				if got := out[id].active.count(); got != n {
					t.Errorf("%s: %d active tasks, want %d", id, got, n)
				}
			}
		})
	}
}

func TestStreamsAssignStickyWhenUnchanged(t *testing.T) {
	in := streamsAssignInput{
		members:            streamsAssignTestMembers("p0", "p1", "p1", "p2", "p3", "p3"),
		tasks:              map[string]int32{"a": 8, "b": 8, "c": 5},
		stateful:           map[string]bool{"a": true, "c": true},
		numStandbyReplicas: 2,
	}
	first := assignStreamsTasks(in)
	streamsAssignTestCheck(t, in, first)
	again := assignStreamsTasks(streamsAssignTestFeed(in, first))
	if !reflect.DeepEqual(first, again) {
		t.Fatalf("assignment moved with an unchanged group:\nbefore %v\nafter  %v", first, again)
	}
}

func TestStreamsAssignJoinMovesMinimum(t *testing.T) {
	for _, tc := range []struct {
		name    string
		newProc string
	}{
		{"new process", "p3"},
		{"existing process", "p0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := streamsAssignInput{members: streamsAssignTestMembers("p0", "p1", "p2"), tasks: map[string]int32{"a": 12}}
			before := assignStreamsTasks(in)
			in = streamsAssignTestFeed(in, before)
			in.members = append(in.members, streamsAssignMember{id: "m3", processID: tc.newProc})
			after := assignStreamsTasks(in)
			streamsAssignTestCheck(t, in, after)
			for _, id := range []string{"m0", "m1", "m2"} {
				kept := after[id].active.intersect(before[id].active).count()
				if kept != 3 || after[id].active.count() != 3 {
					t.Errorf("%s kept %d of %v, now has %v; want 3 kept of 3", id, kept, before[id].active, after[id].active)
				}
			}
			if n := after["m3"].active.count(); n != 3 {
				t.Errorf("m3 got %d tasks, want 3", n)
			}
		})
	}
}

func TestStreamsAssignMovedActiveStaysAsStandby(t *testing.T) {
	// When an active moves to a new member, its old owner (warm state)
	// keeps it as a standby.
	in := streamsAssignInput{
		members:            streamsAssignTestMembers("p0", "p1", "p2"),
		tasks:              map[string]int32{"a": 12},
		stateful:           map[string]bool{"a": true},
		numStandbyReplicas: 1,
	}
	before := assignStreamsTasks(in)
	in = streamsAssignTestFeed(in, before)
	for i := range in.members {
		in.members[i].prevStandby = nil
	}
	in.members = append(in.members, streamsAssignMember{id: "m3", processID: "p3"})
	after := assignStreamsTasks(in)
	streamsAssignTestCheck(t, in, after)
	for _, id := range []string{"m0", "m1", "m2"} {
		moved := before[id].active.minus(after[id].active)
		if moved.count() != 1 || !moved.minus(after[id].standby).equal(nil) {
			t.Errorf("%s: moved %v, standbys now %v; want the moved task kept as standby", id, moved, after[id].standby)
		}
	}
}

func TestStreamsAssignLeaverTasksGoToStandbyHolder(t *testing.T) {
	// m2 left holding a0 and a5 as actives; m0 has a5 and m1 has a0 as
	// standbys, so each takes the one it has state for.
	in := streamsAssignInput{
		members: []streamsAssignMember{
			{id: "m0", processID: "p0", prevActive: streamsTasks{"a": {1, 2}}, prevStandby: streamsTasks{"a": {5}}},
			{id: "m1", processID: "p1", prevActive: streamsTasks{"a": {3, 4}}, prevStandby: streamsTasks{"a": {0}}},
		},
		tasks:              map[string]int32{"a": 6},
		stateful:           map[string]bool{"a": true},
		numStandbyReplicas: 1,
	}
	out := assignStreamsTasks(in)
	streamsAssignTestCheck(t, in, out)
	if want := (streamsTasks{"a": {1, 2, 5}}); !out["m0"].active.equal(want) {
		t.Errorf("m0 active %v, want %v", out["m0"].active, want)
	}
	if want := (streamsTasks{"a": {0, 3, 4}}); !out["m1"].active.equal(want) {
		t.Errorf("m1 active %v, want %v", out["m1"].active, want)
	}
}

func TestStreamsAssignStandbyHolderOnlyWithinBalance(t *testing.T) {
	// m0 holds every task as a standby, but taking all of them as actives
	// would unbalance the group: it takes its share, the rest spreads.
	in := streamsAssignInput{
		members: []streamsAssignMember{
			{id: "m0", processID: "p0", prevStandby: streamsTasks{"a": {0, 1, 2, 3, 4, 5}}},
			{id: "m1", processID: "p1"},
			{id: "m2", processID: "p2"},
		},
		tasks:    map[string]int32{"a": 6},
		stateful: map[string]bool{"a": true},
	}
	out := assignStreamsTasks(in)
	streamsAssignTestCheck(t, in, out)
	for id, tg := range out {
		if tg.active.count() != 2 {
			t.Errorf("%s: %v, want 2 tasks", id, tg.active)
		}
	}
}

func TestStreamsAssignStandbyPlacement(t *testing.T) {
	for _, tc := range []struct {
		name     string
		procs    []string
		replicas int
		want     int // standbys per stateful task
	}{
		{"one replica", []string{"p0", "p0", "p1", "p1", "p2", "p2"}, 1, 1},
		{"two replicas", []string{"p0", "p0", "p1", "p1", "p2", "p2"}, 2, 2},
		{"two replicas, two processes", []string{"p0", "p0", "p1", "p1"}, 2, 1},
		{"one process", []string{"p0", "p0", "p0"}, 1, 0},
		{"none", []string{"p0", "p1"}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := streamsAssignInput{
				members:            streamsAssignTestMembers(tc.procs...),
				tasks:              map[string]int32{"stateful": 6, "stateless": 6},
				stateful:           map[string]bool{"stateful": true},
				numStandbyReplicas: tc.replicas,
			}
			out := assignStreamsTasks(in)
			streamsAssignTestCheck(t, in, out) // other processes, no duplicates, none stateless
			n := 0
			for _, tg := range out {
				n += tg.standby.count()
			}
			if n != 6*tc.want {
				t.Fatalf("%d standbys, want %d", n, 6*tc.want)
			}
		})
	}
}

func TestStreamsAssignIgnoresUnknownPrevTasks(t *testing.T) {
	in := streamsAssignInput{
		members: []streamsAssignMember{
			{id: "m0", processID: "p0", prevActive: streamsTasks{"gone": {0}, "a": {0, 7}}},
			{id: "m1", processID: "p1", prevActive: streamsTasks{"a": {1, 2}}, prevStandby: streamsTasks{"a": {9}}},
		},
		tasks:              map[string]int32{"a": 4},
		stateful:           map[string]bool{"a": true},
		numStandbyReplicas: 1,
	}
	out := assignStreamsTasks(in)
	streamsAssignTestCheck(t, in, out)
	if !out["m0"].active.has("a", 0) || !out["m1"].active.has("a", 1) || !out["m1"].active.has("a", 2) {
		t.Fatalf("previous tasks not kept: %v", out)
	}
}

// streamsAssignTestMessy builds a group with scattered previous
// assignments (overlaps, gaps, a second claim on some actives), from a
// fixed sequence so it is the same every run.
func streamsAssignTestMessy(members, procs int, subs int, perSub int32, replicas int) streamsAssignInput {
	in := streamsAssignInput{tasks: map[string]int32{}, stateful: map[string]bool{}, numStandbyReplicas: replicas}
	for s := range subs {
		sub := fmt.Sprintf("s%02d", s)
		in.tasks[sub] = perSub
		in.stateful[sub] = s%2 == 0
	}
	x := uint32(12345)
	next := func(n int) int {
		x = x*1664525 + 1013904223
		return int(x>>8) % n
	}
	for i := range members {
		m := streamsAssignMember{id: fmt.Sprintf("m%04d", i), processID: fmt.Sprintf("p%03d", i%procs)}
		for range 2 * subs * int(perSub) / members {
			sub := fmt.Sprintf("s%02d", next(subs+1)) // one in subs+1 is gone
			p := int32(next(int(perSub)))
			if next(3) == 0 {
				m.prevStandby = m.prevStandby.add(sub, p)
			} else {
				m.prevActive = m.prevActive.add(sub, p)
			}
		}
		in.members = append(in.members, m)
	}
	return in
}

func TestStreamsAssignDeterministic(t *testing.T) {
	in := streamsAssignTestMessy(40, 13, 5, 37, 2)
	a := assignStreamsTasks(in)
	streamsAssignTestCheck(t, in, a)
	for range 5 {
		if b := assignStreamsTasks(in); !reflect.DeepEqual(a, b) {
			t.Fatal("two runs on the same input differ")
		}
	}
	rev := in
	rev.members = slices.Clone(in.members)
	slices.Reverse(rev.members)
	if b := assignStreamsTasks(rev); !reflect.DeepEqual(a, b) {
		t.Fatal("member order changed the result")
	}
}

func TestStreamsAssignLarge(t *testing.T) {
	// 1,000 members (250 processes of 4 threads) and 10,000 tasks; the
	// second round drops 100 members and adds 50.
	in := streamsAssignTestMessy(1000, 250, 10, 1000, 1)
	out := assignStreamsTasks(in)
	streamsAssignTestCheck(t, in, out)

	in = streamsAssignTestFeed(in, out)
	in.members = in.members[100:]
	for i := range 50 {
		in.members = append(in.members, streamsAssignMember{id: fmt.Sprintf("n%04d", i), processID: fmt.Sprintf("q%03d", i/2)})
	}
	again := assignStreamsTasks(in)
	streamsAssignTestCheck(t, in, again)
	kept := 0
	for _, m := range in.members {
		kept += again[m.id].active.intersect(m.prevActive).count()
	}
	if lo, hi := streamsAssignTestSpread(again); hi-lo > 2 {
		t.Errorf("active tasks per member range %d..%d", lo, hi)
	}
	t.Logf("second round kept %d of 10000 actives in place", kept)
}
