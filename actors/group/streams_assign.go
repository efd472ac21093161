package group

// The task assignor of KIP-1071 streams groups: a sticky assignor that
// behaves like Apache Kafka's StickyTaskAssignor. It is a pure function
// of its input; ties are broken by process and member id so the same
// group always gets the same assignment.
//
// Actives are placed in three passes: a task stays with its previous
// active owner while that member is under its fair share; then a task
// goes to a member that held it as a standby (its state is warm there);
// the rest go to the least loaded process, and within it to the least
// loaded member. Standbys of stateful tasks follow, each on a process
// that holds no other copy of the task: preferring the task's previous
// active owner, then its previous standby holders, then the least loaded
// process.

import (
	"cmp"
	"container/heap"
	"slices"
)

// streamsAssignMember is one member as the assignor sees it.
type streamsAssignMember struct {
	id          string
	processID   string       // members (stream threads) of one application instance share it
	prevActive  streamsTasks // what the member holds now (assigned or being revoked), for stickiness
	prevStandby streamsTasks
}

type streamsAssignInput struct {
	members            []streamsAssignMember // sorted by id, ids unique
	tasks              map[string]int32      // subtopology id -> task count (tasks 0..n-1)
	stateful           map[string]bool       // subtopologies with state stores; standbys only for these
	numStandbyReplicas int                   // group config streams.num.standby.replicas
}

// streamsTarget is the tasks one member should own.
type streamsTarget struct {
	active, standby streamsTasks
}

// assignStreamsTasks returns every member's target (an entry for every
// member, possibly empty).
func assignStreamsTasks(in streamsAssignInput) map[string]streamsTarget {
	if len(in.members) == 0 {
		return map[string]streamsTarget{}
	}
	s := streamsAssignNewState(in)
	s.assignActive()
	s.assignStandby()
	return s.targets()
}

// streamsAssignMem is a member during assignment.
type streamsAssignMem struct {
	id       string
	proc     *streamsAssignProc
	active   int   // active tasks given so far
	total    int   // active and standby tasks given so far
	actives  []int // flat task indexes
	standbys []int
	pos      int // index in proc.members
}

// streamsAssignProc is a process (application instance) during
// assignment. Its load is total/capacity: tasks per member, so a process
// with more threads takes proportionally more.
type streamsAssignProc struct {
	id       string
	idx      int // index in streamsAssignState.procs
	capacity int // members
	total    int // tasks given to its members
	members  streamsAssignHeap[*streamsAssignMem]
	pos      int // index in streamsAssignState.byLoad
}

func (m *streamsAssignMem) heapPos() *int  { return &m.pos }
func (p *streamsAssignProc) heapPos() *int { return &p.pos }

// streamsAssignMemLess orders a process's members least loaded first.
func streamsAssignMemLess(a, b *streamsAssignMem) bool {
	if a.total != b.total {
		return a.total < b.total
	}
	return a.id < b.id
}

// streamsAssignProcLess orders processes least loaded first; on equal
// load the bigger process goes first (it has the most room left), then
// by id for determinism. Loads are compared by cross-multiplying, which
// is exact where floats are not.
func streamsAssignProcLess(a, b *streamsAssignProc) bool {
	if la, lb := a.total*b.capacity, b.total*a.capacity; la != lb {
		return la < lb
	}
	if a.capacity != b.capacity {
		return a.capacity > b.capacity
	}
	return a.id < b.id
}

// streamsAssignQuota is the fair share a member may reach by
// stickiness: ceil(tasks / members) over the members that have not yet
// reached it. When a member reaches the share it leaves the count with
// the tasks it took, so the share of the rest stays exact (it never
// grows).
type streamsAssignQuota struct {
	tasks, members, per int
}

func streamsAssignNewQuota(tasks, members int) streamsAssignQuota {
	q := streamsAssignQuota{tasks: tasks, members: members}
	q.recompute()
	return q
}

func (q *streamsAssignQuota) recompute() {
	q.per = 0
	if q.members > 0 {
		q.per = (q.tasks + q.members - 1) / q.members
	}
}

// counted notes that a member now has n tasks.
func (q *streamsAssignQuota) counted(n int) {
	if n == q.per {
		q.members--
		q.tasks -= n
		q.recompute()
	}
}

// streamsAssignState is one assignment run. Tasks are numbered flat:
// subtopologies in id order, partitions ascending, so ordering by index
// is ordering by (subtopology, partition).
type streamsAssignState struct {
	replicas int
	subs     []string         // subtopologies with tasks, sorted
	base     map[string]int   // subtopology -> flat index of its task 0
	count    map[string]int32 // subtopology -> task count
	taskSub  []int32          // flat index -> index in subs
	taskPart []int32          // flat index -> partition
	stateful []bool           // by index in subs

	mems   []*streamsAssignMem // by id
	procs  []*streamsAssignProc
	byLoad streamsAssignHeap[*streamsAssignProc]

	prevActive  []*streamsAssignMem   // flat index -> previous active owner present now
	prevStandby [][]*streamsAssignMem // flat index -> previous standby holders present now
	holders     [][]int32             // flat index -> processes holding a copy now

	activeQuota, totalQuota streamsAssignQuota
}

func streamsAssignNewState(in streamsAssignInput) *streamsAssignState {
	s := &streamsAssignState{replicas: max(in.numStandbyReplicas, 0)}
	s.indexTasks(in)
	s.indexMembers(in)

	activeTasks, allTasks := len(s.taskSub), len(s.taskSub)
	for t := range s.taskSub {
		if s.stateful[s.taskSub[t]] {
			allTasks += s.replicas
		}
	}
	s.activeQuota = streamsAssignNewQuota(activeTasks, len(s.mems))
	s.totalQuota = streamsAssignNewQuota(allTasks, len(s.mems))
	return s
}

// indexTasks numbers the tasks of the topology.
func (s *streamsAssignState) indexTasks(in streamsAssignInput) {
	for sub, n := range in.tasks {
		if n > 0 {
			s.subs = append(s.subs, sub)
		}
	}
	slices.Sort(s.subs)
	s.base, s.count = make(map[string]int, len(s.subs)), in.tasks
	for i, sub := range s.subs {
		s.base[sub] = len(s.taskSub)
		s.stateful = append(s.stateful, in.stateful[sub])
		for p := range in.tasks[sub] {
			s.taskSub = append(s.taskSub, int32(i))
			s.taskPart = append(s.taskPart, p)
		}
	}
	n := len(s.taskSub)
	s.prevActive = make([]*streamsAssignMem, n)
	s.prevStandby = make([][]*streamsAssignMem, n)
	s.holders = make([][]int32, n)
}

// indexMembers groups members into processes and records what they
// held. Members are taken in id order, processes numbered by their
// first member, so nothing depends on map order.
func (s *streamsAssignState) indexMembers(in streamsAssignInput) {
	members := slices.Clone(in.members)
	slices.SortStableFunc(members, func(a, b streamsAssignMember) int { return cmp.Compare(a.id, b.id) })

	procs := map[string]*streamsAssignProc{}
	for _, am := range members {
		p := procs[am.processID]
		if p == nil {
			p = &streamsAssignProc{id: am.processID, idx: len(s.procs)}
			p.members.less = streamsAssignMemLess
			procs[am.processID] = p
			s.procs = append(s.procs, p)
		}
		m := &streamsAssignMem{id: am.id, proc: p}
		p.capacity++
		heap.Push(&p.members, m)
		s.mems = append(s.mems, m)

		// A task claimed as active by two members (a hand-over in
		// flight) stays with the first by id.
		s.eachKnown(am.prevActive, func(t int) {
			if s.prevActive[t] == nil {
				s.prevActive[t] = m
			}
		})
		s.eachKnown(am.prevStandby, func(t int) {
			s.prevStandby[t] = append(s.prevStandby[t], m)
		})
	}
	s.byLoad.less = streamsAssignProcLess
	for _, p := range s.procs {
		heap.Push(&s.byLoad, p)
	}
}

// eachKnown calls fn with the flat index of every task of ts that is
// still in the topology; tasks of removed subtopologies or beyond a
// shrunk task count are forgotten.
func (s *streamsAssignState) eachKnown(ts streamsTasks, fn func(t int)) {
	for sub, ps := range ts {
		base, ok := s.base[sub]
		if !ok {
			continue
		}
		for _, p := range ps {
			if p >= 0 && p < s.count[sub] {
				fn(base + int(p))
			}
		}
	}
}

// held reports whether process p already holds a copy of task t.
func (s *streamsAssignState) held(t int, p *streamsAssignProc) bool {
	return slices.Contains(s.holders[t], int32(p.idx))
}

// give assigns task t to member m and keeps loads, quotas and heaps
// current.
func (s *streamsAssignState) give(m *streamsAssignMem, t int, active bool) {
	p := m.proc
	m.total++
	p.total++
	if active {
		m.active++
		m.actives = append(m.actives, t)
		s.activeQuota.counted(m.active)
	} else {
		m.standbys = append(m.standbys, t)
	}
	s.totalQuota.counted(m.total)
	s.holders[t] = append(s.holders[t], int32(p.idx))
	heap.Fix(&p.members, m.pos)
	heap.Fix(&s.byLoad, p.pos)
}

// byPartition returns tasks ordered by (partition, subtopology): the
// sticky passes walk partitions across subtopologies so that, when
// members must give tasks up, each gives up its highest partitions of
// every subtopology alike (co-partitioned tasks tend to stay together).
func (s *streamsAssignState) byPartition(tasks []int) []int {
	slices.SortFunc(tasks, func(a, b int) int {
		if c := cmp.Compare(s.taskPart[a], s.taskPart[b]); c != 0 {
			return c
		}
		return cmp.Compare(s.taskSub[a], s.taskSub[b])
	})
	return tasks
}

func (s *streamsAssignState) assignActive() {
	all := make([]int, len(s.taskSub))
	for t := range all {
		all[t] = t
	}
	underQuota := func(m *streamsAssignMem) bool { return m.active < s.activeQuota.per }

	// 1. Keep a task with its previous active owner.
	var rest []int
	for _, t := range s.byPartition(all) {
		if m := s.prevActive[t]; m != nil && underQuota(m) {
			s.give(m, t, true)
			continue
		}
		rest = append(rest, t)
	}

	// 2. Move it to a member that has its state as a standby.
	left := rest[:0]
	for _, t := range rest {
		if m := s.leastLoadedPrev(s.prevStandby[t], t, underQuota); m != nil {
			s.give(m, t, true)
			continue
		}
		left = append(left, t)
	}

	// 3. The rest, in (subtopology, partition) order so a fresh group
	// gets ranges of a subtopology per member, go to the least loaded
	// process and member. Fresh, that is also the least loaded member
	// of the group: a process with the fewest tasks per member has a
	// member with no more than the least of any other process.
	slices.Sort(left)
	for _, t := range left {
		p := s.byLoad.items[0]
		s.give(p.members.items[0], t, true)
	}
}

// leastLoadedPrev picks, among members that held task t before, one
// whose process has no copy of t yet and that ok accepts: the one on
// the least loaded process, then the least loaded, then the first by id.
func (s *streamsAssignState) leastLoadedPrev(cands []*streamsAssignMem, t int, ok func(*streamsAssignMem) bool) *streamsAssignMem {
	var best *streamsAssignMem
	for _, m := range cands {
		if !ok(m) || s.held(t, m.proc) {
			continue
		}
		if best == nil || streamsAssignPrevLess(m, best) {
			best = m
		}
	}
	return best
}

func streamsAssignPrevLess(a, b *streamsAssignMem) bool {
	if a.proc != b.proc {
		la, lb := a.proc.total*b.proc.capacity, b.proc.total*a.proc.capacity
		if la != lb {
			return la < lb
		}
	}
	return streamsAssignMemLess(a, b)
}

func (s *streamsAssignState) assignStandby() {
	if s.replicas == 0 {
		return
	}
	var stateful []int
	for t := range s.taskSub {
		if s.stateful[s.taskSub[t]] {
			stateful = append(stateful, t)
		}
	}
	// Walk from the highest partition down, the reverse of the actives'
	// sticky pass: members that had to give up actives gave up their
	// highest partitions, and this lets them keep those as standbys
	// before their share fills up.
	s.byPartition(stateful)
	slices.Reverse(stateful)

	underQuota := func(m *streamsAssignMem) bool { return m.total < s.totalQuota.per }
	type later struct{ t, copies int }
	var toLeastLoaded []later
	for _, t := range stateful {
		for i := range s.replicas {
			if m := s.prevActive[t]; m != nil && underQuota(m) && !s.held(t, m.proc) {
				s.give(m, t, false)
				continue
			}
			if m := s.leastLoadedPrev(s.prevStandby[t], t, underQuota); m != nil {
				s.give(m, t, false)
				continue
			}
			toLeastLoaded = append(toLeastLoaded, later{t, s.replicas - i})
			break
		}
	}

	// Descending (subtopology, partition): the mirror of the actives'
	// ranges, so a member's standbys tend not to sit next to its actives.
	slices.SortFunc(toLeastLoaded, func(a, b later) int { return cmp.Compare(b.t, a.t) })
	for _, l := range toLeastLoaded {
		for range l.copies {
			if !s.standbyToLeastLoaded(l.t) {
				break // every process holds a copy: fewer standbys
			}
		}
	}
}

// standbyToLeastLoaded gives a standby of t to the least loaded member
// of the least loaded process without a copy of t. Processes holding a
// copy are popped aside; there are at most replicas+1 of them.
func (s *streamsAssignState) standbyToLeastLoaded(t int) bool {
	var aside []*streamsAssignProc
	var found *streamsAssignProc
	for s.byLoad.Len() > 0 {
		p := heap.Pop(&s.byLoad).(*streamsAssignProc)
		aside = append(aside, p)
		if !s.held(t, p) {
			found = p
			break
		}
	}
	for _, p := range aside {
		heap.Push(&s.byLoad, p)
	}
	if found == nil {
		return false
	}
	s.give(found.members.items[0], t, false)
	return true
}

// targets turns each member's flat task indexes into task sets; sorting
// the indexes sorts by (subtopology, partition), so appending keeps
// every list sorted.
func (s *streamsAssignState) targets() map[string]streamsTarget {
	out := make(map[string]streamsTarget, len(s.mems))
	for _, m := range s.mems {
		out[m.id] = streamsTarget{active: s.tasksOf(m.actives), standby: s.tasksOf(m.standbys)}
	}
	return out
}

func (s *streamsAssignState) tasksOf(ts []int) streamsTasks {
	if len(ts) == 0 {
		return nil
	}
	slices.Sort(ts)
	out := streamsTasks{}
	for _, t := range ts {
		sub := s.subs[s.taskSub[t]]
		out[sub] = append(out[sub], s.taskPart[t])
	}
	return out
}

// streamsAssignHeap is a min-heap (for container/heap) that keeps each
// item's position, so an item whose load changed is fixed in place.
type streamsAssignHeap[T interface{ heapPos() *int }] struct {
	items []T
	less  func(a, b T) bool
}

func (h *streamsAssignHeap[T]) Len() int           { return len(h.items) }
func (h *streamsAssignHeap[T]) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }

func (h *streamsAssignHeap[T]) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.items[i].heapPos() = i
	*h.items[j].heapPos() = j
}

func (h *streamsAssignHeap[T]) Push(x any) {
	it := x.(T)
	*it.heapPos() = len(h.items)
	h.items = append(h.items, it)
}

func (h *streamsAssignHeap[T]) Pop() any {
	n := len(h.items) - 1
	it := h.items[n]
	var zero T
	h.items[n] = zero
	h.items = h.items[:n]
	*it.heapPos() = -1
	return it
}
