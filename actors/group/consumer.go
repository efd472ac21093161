package group

// KIP-848 consumer groups (ConsumerGroupHeartbeat), following Kafka's
// GroupMetadataManager: members join with epoch 0, the group epoch is
// bumped when membership, subscriptions or the subscribed topics change,
// a server-side assignor computes the target assignment, and each member
// is reconciled towards its target on its own heartbeats: partitions to
// revoke first (the member stays at its epoch until it reports them
// gone), then partitions to gain once their previous owner released them.

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicSource is what consumer groups read of the broker's topics. It must
// be safe to call from any goroutine.
type TopicSource interface {
	// Topic returns a topic's id and partition count.
	Topic(name string) (id [16]byte, partitions int32, ok bool)
	// TopicNames lists every topic (for regex subscriptions), the
	// internal ones included: Kafka's broker-side resolution matches them.
	TopicNames() []string
}

type topicMeta struct {
	name       string
	id         [16]byte
	partitions int32
}

type memberState int8

const (
	msStable memberState = iota
	// msUnrevoked: the member must give up partitionsPending first.
	msUnrevoked
	// msUnreleased: the member waits for partitions another still holds.
	msUnreleased
)

const (
	leaveEpoch       = -1
	staticLeaveEpoch = -2
)

type cgMember struct {
	id               string
	instanceID       *string
	rackID           *string
	clientID         string
	clientHost       string
	subscribedNames  []string // sorted
	subscribedRegex  *string
	serverAssignor   *string
	rebalanceTimeout time.Duration

	epoch, prevEpoch int32
	state            memberState
	assigned         assignment
	pendingRevoke    assignment
	// assignedAt is each partition's assignment epoch (KIP-1251): the
	// member epoch at which it was given this partition, for every
	// partition in assigned or pendingRevoke. A commit from an older
	// member epoch is taken for a partition assigned at or before it.
	assignedAt map[partKey]int32
	// resolved is the member's subscription as topic names that exist:
	// its names plus what its regex matches (refreshed on heartbeats).
	resolved []string

	sessionDeadline   time.Time
	rebalanceDeadline time.Time // while msUnrevoked
}

// partKey is a partition by topic id.
type partKey struct {
	topic     [16]byte
	partition int32
}

// syncAssignedAt gives every partition the member holds without an
// assignment epoch the member's current one (new partitions, or state
// written before assignment epochs were kept) and forgets partitions it
// no longer holds.
func (m *cgMember) syncAssignedAt() {
	epoch := m.epoch
	if epoch < 0 {
		epoch = m.prevEpoch // a static member away for a while
	}
	held := make(map[partKey]int32, m.assigned.count()+m.pendingRevoke.count())
	for _, a := range []assignment{m.assigned, m.pendingRevoke} {
		for t, ps := range a {
			for _, p := range ps {
				k := partKey{t, p}
				e, ok := m.assignedAt[k]
				if !ok {
					e = epoch
				}
				held[k] = e
			}
		}
	}
	m.assignedAt = held
}

type consumerGroup struct {
	epoch           int32 // the group epoch
	assignmentEpoch int32 // the epoch the target assignment was computed at
	members         map[string]*cgMember
	static          map[string]string // instance id -> member id
	target          map[string]assignment
	// topics is the subscription metadata: every subscribed topic that
	// exists, with its id and partition count.
	topics map[string]topicMeta
	dirty  bool // something persisted changed in this step

	// ids is the member ids, sorted; owners indexes who holds each
	// partition (member_index.go). Derived from members, not persisted.
	ids    memberIDs
	owners map[partKey]string
	// subsStale: membership or a subscription changed since the
	// subscriptions were last resolved, so the next heartbeat resolves
	// them all; otherwise it only checks the subscribed topics' metadata.
	subsStale bool
	// subscribedNames is every member's subscribed names, as last
	// resolved; anyRegex: some member subscribes by regex.
	subscribedNames []string
	anyRegex        bool
	// floor is at or before every member's session and revocation
	// deadline while known (zero at: none), so advance walks the members
	// only when something may be due. Set deadlines go through
	// noteDeadline; unknown after a restore.
	floor struct {
		at    time.Time
		known bool
	}
	// touched and gone are the members whose records the step must
	// write, or tombstone; legacy: read from a snapshot with members
	// inline, so the next write writes every member (cgcodec.go).
	touched, gone map[string]bool
	legacy        bool
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members: map[string]*cgMember{},
		owners:  map[partKey]string{},
		static:  map[string]string{},
		target:  map[string]assignment{},
		topics:  map[string]topicMeta{},
	}
}

func (c *consumerGroup) state() State {
	switch {
	case len(c.members) == 0:
		return Empty
	case c.epoch > c.assignmentEpoch:
		return Assigning
	}
	for _, m := range c.members {
		if m.epoch != c.assignmentEpoch || m.state != msStable {
			return Reconciling
		}
	}
	return Stable
}

func (c *consumerGroup) subscribes(topic string) bool {
	for _, m := range c.members {
		if slices.Contains(m.resolved, topic) || slices.Contains(m.subscribedNames, topic) {
			return true
		}
	}
	return false
}

// nextDeadline is when advance may next have something to do: the
// earliest member deadline, or a time at or before it (see floor).
func (c *consumerGroup) nextDeadline() time.Time {
	if !c.floor.known {
		c.scanDeadlines(time.Time{})
	}
	return c.floor.at
}

// noteDeadline keeps the floor at or below a deadline just set.
func (c *consumerGroup) noteDeadline(t time.Time) {
	if c.floor.known && !t.IsZero() && (c.floor.at.IsZero() || t.Before(c.floor.at)) {
		c.floor.at = t
	}
}

// scanDeadlines walks the members once: it returns those whose session
// or revocation deadline is at or before now (none for a zero now), in
// member id order, and sets the floor to the earliest deadline of the
// others.
func (c *consumerGroup) scanDeadlines(now time.Time) []string {
	var due []string
	var next time.Time
	for id, m := range c.members {
		revoking := m.state == msUnrevoked && !m.rebalanceDeadline.IsZero()
		if !now.IsZero() && ((!m.sessionDeadline.IsZero() && !now.Before(m.sessionDeadline)) || (revoking && !now.Before(m.rebalanceDeadline))) {
			due = append(due, id)
			continue
		}
		for _, t := range []time.Time{m.sessionDeadline, m.rebalanceDeadline} {
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	c.floor.at, c.floor.known = next, true
	sort.Strings(due)
	return due
}

// advance fences members whose session or revocation deadline passed, in
// member id order. Members are only walked once the floor is reached, so
// a heartbeat does not cost a pass over a large group.
func (c *consumerGroup) advance(g *Group, now time.Time) {
	if !c.floor.known || (!c.floor.at.IsZero() && !now.Before(c.floor.at)) {
		for _, id := range c.scanDeadlines(now) {
			c.fence(c.members[id])
		}
	}
	g.recordCG()
}

// sortedMembers is the member ids in order. The slice is the group's
// index: read it, do not keep or change it across membership changes.
func (c *consumerGroup) sortedMembers() []string {
	if len(c.ids) != len(c.members) {
		// Members put in place without addMember (a test's literal).
		c.rebuildIndexes()
	}
	return c.ids
}

// fence removes a member; the group epoch moves so that the others are
// reassigned its partitions.
func (c *consumerGroup) fence(m *cgMember) {
	c.removeMember(m)
	delete(c.target, m.id)
	if m.instanceID != nil && c.static[*m.instanceID] == m.id {
		delete(c.static, *m.instanceID)
	}
	c.epoch++
	c.dirty = true
}

func cgError(err *kerr.Error, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.ErrorCode = err.Code
	if msg != "" {
		resp.ErrorMessage = &msg
	}
	return resp
}

// validateCGHeartbeat is Kafka's request validation; nil if valid.
func validateCGHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	bad := func(msg string) *kmsg.ConsumerGroupHeartbeatResponse { return cgError(kerr.InvalidRequest, msg) }
	switch {
	case req.Group == "":
		return bad("GroupId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return bad("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return bad("RackId can't be empty.")
	case req.Version >= 1 && req.MemberID == "":
		return bad("MemberId can't be empty.")
	}
	switch e := req.MemberEpoch; {
	case e > 0 || e == leaveEpoch:
		if req.MemberID == "" {
			return bad("MemberId can't be empty.")
		}
	case e == 0:
		if req.RebalanceTimeoutMillis == -1 {
			return bad("RebalanceTimeoutMs must be provided in first request.")
		}
		if req.Topics == nil || len(req.Topics) > 0 {
			return bad("TopicPartitions must be empty when (re-)joining.")
		}
		if len(req.SubscribedTopicNames) == 0 && req.SubscribedTopicRegex == nil {
			return bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
		}
	case e == staticLeaveEpoch:
		if req.MemberID == "" {
			return bad("MemberId can't be empty.")
		}
		if req.InstanceID == nil {
			return bad("InstanceId can't be null.")
		}
	default:
		return bad("MemberEpoch is invalid.")
	}
	if a := req.ServerAssignor; a != nil && assignors[*a] == nil {
		return cgError(kerr.UnsupportedAssignor, fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: range, uniform.", *a))
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileSubscription(*req.SubscribedTopicRegex); err != nil {
			return cgError(kerr.InvalidRegularExpression, fmt.Sprintf("SubscribedTopicRegex %q is not a valid regular expression: %v", *req.SubscribedTopicRegex, err))
		}
	}
	return nil
}

// compileSubscription compiles a subscription regex; Kafka matches the
// whole topic name (RE2J's matches()).
func compileSubscription(expr string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + expr + ")$")
}

// ConsumerGroupHeartbeat handles a KIP-848 heartbeat: join (epoch 0),
// heartbeat, leave (-1) or a static member's temporary leave (-2).
func (g *Group) ConsumerGroupHeartbeat(now time.Time, ref Ref, req *kmsg.ConsumerGroupHeartbeatRequest, client Client, topics TopicSource) Effects {
	resp := g.cgHeartbeat(now, req, client, topics)
	if resp.ErrorCode == 0 {
		resp.HeartbeatIntervalMillis = int32(g.consumerHeartbeatInterval() / time.Millisecond)
	}
	g.reply(ref, resp)
	g.advance(now)
	g.recordCG()
	return g.take()
}

func (g *Group) cgHeartbeat(now time.Time, req *kmsg.ConsumerGroupHeartbeatRequest, client Client, topics TopicSource) *kmsg.ConsumerGroupHeartbeatResponse {
	if bad := validateCGHeartbeat(req); bad != nil {
		return bad
	}
	if req.MemberEpoch == leaveEpoch || req.MemberEpoch == staticLeaveEpoch {
		return g.cgLeave(req)
	}
	if g.cg == nil {
		switch {
		case g.sg != nil, g.st != nil:
			return cgError(kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a consumer group.", g.id))
		case g.live && (g.state != Empty || len(g.pending) > 0):
			return cgError(kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a consumer group.", g.id))
		case req.MemberEpoch != 0:
			return cgError(kerr.UnknownMemberID, fmt.Sprintf("Group %s has no member %s.", g.id, req.MemberID))
		}
		// A new group, or an empty classic group taken over (its offsets
		// stay).
		g.create(now)
		g.cg = newConsumerGroup()
		g.protocolType = "consumer"
		g.cg.dirty = true
	}
	c := g.cg
	memberID := req.MemberID
	if memberID == "" {
		memberID = newUUID()
	}
	if len(c.members) >= g.cfg.MaxSize && c.members[memberID] == nil {
		return cgError(kerr.GroupMaxSizeReached, fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", g.cfg.MaxSize))
	}
	owned := ownedFromRequest(req.Topics)
	var m *cgMember
	replaced := ""
	if req.InstanceID == nil {
		m = c.members[memberID]
		if m == nil && req.MemberEpoch != 0 {
			return cgError(kerr.UnknownMemberID, fmt.Sprintf("Member %s is not in group %s.", memberID, g.id))
		}
		if m != nil {
			if err := checkEpoch(m, req.MemberEpoch, owned, req.Topics != nil); err != nil {
				return err
			}
		}
	} else {
		m = c.members[c.static[*req.InstanceID]]
		switch {
		case req.MemberEpoch == 0 && m == nil:
			m = c.members[memberID]
		case req.MemberEpoch == 0 && m.id != memberID:
			if m.epoch != staticLeaveEpoch {
				return cgError(kerr.UnreleasedInstanceID, fmt.Sprintf("Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", memberID, *req.InstanceID, m.id))
			}
			// The instance comes back under a new member id: it takes
			// over the old member's partitions and target.
			old := m
			replaced = old.id
			m = &cgMember{id: memberID, assigned: old.assigned.clone(), subscribedNames: old.subscribedNames,
				subscribedRegex: old.subscribedRegex, serverAssignor: old.serverAssignor, rebalanceTimeout: old.rebalanceTimeout,
				resolved: old.resolved}
			// assignedAt starts empty: the new incarnation's partitions
			// take its first epoch, so the old one's commits are refused.
			c.target[memberID] = c.target[old.id]
			delete(c.target, old.id)
			c.removeMember(old)
			c.addMember(m)
			c.static[*req.InstanceID] = memberID
			c.dirty = true
		case req.MemberEpoch != 0 && m == nil:
			return cgError(kerr.UnknownMemberID, fmt.Sprintf("Instance id %s is unknown.", *req.InstanceID))
		case req.MemberEpoch != 0 && m.id != memberID:
			return cgError(kerr.FencedInstanceID, fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", memberID, *req.InstanceID, m.id))
		case req.MemberEpoch != 0:
			if err := checkEpoch(m, req.MemberEpoch, owned, req.Topics != nil); err != nil {
				return err
			}
		}
	}
	bump := false
	joined := false
	if m == nil {
		m = &cgMember{id: memberID}
		c.addMember(m)
		bump = true
		joined = true
		c.dirty = true
	}
	if req.MemberEpoch == 0 && m.epoch == staticLeaveEpoch {
		// The same member id back from a temporary leave.
		m.epoch = m.prevEpoch
	}
	if g.updateCGMember(m, req, client) {
		bump = true
		if !joined || !c.resolveJoiner(m) {
			c.subsStale = true
		}
	}
	if topics != nil && (c.subsStale || c.anyRegex || c.subscribedMetaChanged(topics)) {
		if g.refreshSubscriptions(topics) {
			bump = true
		}
	}
	if bump {
		c.epoch++
		c.dirty = true
	}
	if c.epoch > c.assignmentEpoch || replaced != "" {
		c.computeTarget()
	}
	before := m.assigned.clone()
	c.reconcile(m, owned, req.Topics != nil, now)
	m.syncAssignedAt()
	m.sessionDeadline = now.Add(g.consumerSessionTimeout())
	c.noteDeadline(m.sessionDeadline)

	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	id := m.id
	resp.MemberID = &id
	resp.MemberEpoch = m.epoch
	if req.Topics != nil || req.MemberEpoch == 0 || !before.equal(m.assigned) {
		resp.Assignment = &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
		for _, t := range topicsOf(m.assigned) {
			resp.Assignment.Topics = append(resp.Assignment.Topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: t, Partitions: slices.Clone(m.assigned[t])})
		}
		if resp.Assignment.Topics == nil {
			resp.Assignment.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		}
	}
	return resp
}

// checkEpoch is Kafka's epoch validation: a member ahead of the
// coordinator, or behind it other than by one lost response, is fenced.
func checkEpoch(m *cgMember, epoch int32, owned assignment, ownedSent bool) *kmsg.ConsumerGroupHeartbeatResponse {
	if epoch == 0 {
		// A fenced member rejoins in place (KAFKA-19233).
		return nil
	}
	fenced := func(rel string) *kmsg.ConsumerGroupHeartbeatResponse {
		return cgError(kerr.FencedMemberEpoch, fmt.Sprintf("The consumer group member has a %s member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", rel, epoch, m.epoch))
	}
	switch {
	case epoch > m.epoch:
		return fenced("greater")
	case epoch < m.epoch:
		// The previous epoch with a subset of the assignment: the
		// response that moved the member on was lost.
		if epoch != m.prevEpoch || !ownedSent || len(owned.minus(m.assigned)) > 0 {
			return fenced("smaller")
		}
	}
	return nil
}

// updateCGMember takes the request's fields (null: unchanged); true if the
// subscription changed.
func (g *Group) updateCGMember(m *cgMember, req *kmsg.ConsumerGroupHeartbeatRequest, client Client) bool {
	c := g.cg
	changed := false
	if req.InstanceID != nil && (m.instanceID == nil || *m.instanceID != *req.InstanceID) {
		m.instanceID = cloneStr(req.InstanceID)
		c.static[*req.InstanceID] = m.id
		c.touch(m.id)
	}
	if req.RackID != nil && (m.rackID == nil || *m.rackID != *req.RackID) {
		m.rackID = cloneStr(req.RackID)
		c.touch(m.id)
	}
	if req.RebalanceTimeoutMillis != -1 && ms(req.RebalanceTimeoutMillis) != m.rebalanceTimeout {
		m.rebalanceTimeout = ms(req.RebalanceTimeoutMillis)
		c.touch(m.id)
	}
	if req.ServerAssignor != nil && (m.serverAssignor == nil || *m.serverAssignor != *req.ServerAssignor) {
		m.serverAssignor = cloneStr(req.ServerAssignor)
		c.touch(m.id)
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		sort.Strings(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.subscribedNames) {
			m.subscribedNames = names
			changed = true
		}
	}
	if req.SubscribedTopicRegex != nil {
		var re *string
		if *req.SubscribedTopicRegex != "" {
			re = cloneStr(req.SubscribedTopicRegex)
		}
		if (re == nil) != (m.subscribedRegex == nil) || (re != nil && *re != *m.subscribedRegex) {
			m.subscribedRegex = re
			changed = true
		}
	}
	if m.clientID != client.ID || m.clientHost != client.Host {
		m.clientID, m.clientHost = client.ID, client.Host
		c.touch(m.id)
	}
	if changed {
		c.touch(m.id)
	}
	return changed
}

// refreshSubscriptions re-resolves every member's subscription against the
// broker's topics; true if the subscription metadata (topics, ids,
// partition counts) changed, which moves the group epoch.
func (g *Group) refreshSubscriptions(src TopicSource) bool {
	c := g.cg
	var all []string
	for _, m := range c.members {
		if m.subscribedRegex != nil {
			all = src.TopicNames()
			sort.Strings(all)
			break
		}
	}
	topics := map[string]topicMeta{}
	names := map[string]bool{}
	c.anyRegex = false
	for _, id := range c.sortedMembers() {
		m := c.members[id]
		for _, n := range m.subscribedNames {
			names[n] = true
		}
		c.anyRegex = c.anyRegex || m.subscribedRegex != nil
		var resolved []string
		for _, n := range m.subscribedNames {
			if tid, parts, ok := src.Topic(n); ok {
				resolved = append(resolved, n)
				topics[n] = topicMeta{name: n, id: tid, partitions: parts}
			}
		}
		if m.subscribedRegex != nil {
			if re, err := compileSubscription(*m.subscribedRegex); err == nil {
				for _, n := range all {
					if re.MatchString(n) && !slices.Contains(resolved, n) {
						if tid, parts, ok := src.Topic(n); ok {
							resolved = append(resolved, n)
							topics[n] = topicMeta{name: n, id: tid, partitions: parts}
						}
					}
				}
			}
		}
		sort.Strings(resolved)
		if !slices.Equal(resolved, m.resolved) {
			m.resolved = resolved
			c.touch(m.id)
		}
	}
	c.subscribedNames = sortedKeys(names)
	c.subsStale = false
	if len(topics) == len(c.topics) {
		same := true
		for n, t := range topics {
			if c.topics[n] != t {
				same = false
				break
			}
		}
		if same {
			return false
		}
	}
	c.topics = topics
	c.dirty = true
	return true
}

// resolveJoiner resolves a new member's subscription alone when it names
// only topics the group already subscribes to by name (and no regex): the
// group's subscription metadata cannot change then, so a join in a large
// group does not re-resolve every member. False: a full resolve is needed.
func (c *consumerGroup) resolveJoiner(m *cgMember) bool {
	if c.subsStale || m.subscribedRegex != nil {
		return false
	}
	var resolved []string
	for _, n := range m.subscribedNames {
		if _, ok := slices.BinarySearch(c.subscribedNames, n); !ok {
			return false
		}
		if _, ok := c.topics[n]; ok {
			resolved = append(resolved, n)
		}
	}
	m.resolved = resolved
	c.touch(m.id)
	return true
}

// subscribedMetaChanged reports whether a topic the members subscribe to
// by name was created, deleted or changed (id, partition count) since the
// subscriptions were last resolved: the check a heartbeat makes when
// neither membership nor any subscription changed, in the number of
// subscribed topics rather than of members.
func (c *consumerGroup) subscribedMetaChanged(src TopicSource) bool {
	for _, n := range c.subscribedNames {
		id, parts, ok := src.Topic(n)
		cur, had := c.topics[n]
		if ok != had || (ok && (cur.id != id || cur.partitions != parts)) {
			return true
		}
	}
	return false
}

// preferredAssignor is the assignor most members ask for (ties by name),
// or the default.
func (c *consumerGroup) preferredAssignor() string {
	votes := map[string]int{}
	for _, m := range c.members {
		if m.serverAssignor != nil {
			votes[*m.serverAssignor]++
		}
	}
	best, n := defaultAssignor, 0
	for _, name := range []string{"range", "uniform"} {
		if votes[name] > n {
			best, n = name, votes[name]
		}
	}
	return best
}

// computeTarget runs the assignor for the current group epoch.
func (c *consumerGroup) computeTarget() {
	in := assignInput{members: c.sortedMembers(), subscribed: map[string][]string{}, topics: c.topics, prev: c.target}
	for _, id := range in.members {
		in.subscribed[id] = c.members[id].resolved
	}
	target := assignors[c.preferredAssignor()](in)
	old := c.target
	c.target = make(map[string]assignment, len(in.members))
	for _, id := range in.members {
		c.target[id] = target[id]
		if !old[id].equal(target[id]) {
			c.touch(id)
		}
	}
	c.assignmentEpoch = c.epoch
	c.dirty = true
}

// reconcile moves m towards its target (Kafka's CurrentAssignmentBuilder).
func (c *consumerGroup) reconcile(m *cgMember, owned assignment, ownedSent bool, now time.Time) {
	target := c.target[m.id]
	ownsAny := func(a assignment) bool { return !ownedSent || owned.overlaps(a) }
	switch m.state {
	case msStable:
		if m.epoch == c.assignmentEpoch {
			return
		}
		c.nextAssignment(m, m.epoch, target, ownsAny, now)
	case msUnrevoked:
		if ownsAny(m.pendingRevoke) {
			return
		}
		c.nextAssignment(m, min(m.epoch+1, c.assignmentEpoch), target, ownsAny, now)
	case msUnreleased:
		c.nextAssignment(m, m.epoch, target, ownsAny, now)
	}
}

func (c *consumerGroup) nextAssignment(m *cgMember, epoch int32, target assignment, ownsAny func(assignment) bool, now time.Time) {
	keep := m.assigned.intersect(target)
	revoke := m.assigned.minus(keep)
	want := target.minus(keep)
	var free assignment
	unreleased := false
	for t, ps := range want {
		for _, p := range ps {
			if c.heldByOther(m.id, partKey{t, p}) {
				unreleased = true
				continue
			}
			free = free.add(t, p)
		}
	}
	prev := *m
	setEpoch := func(e int32) {
		if m.epoch != e {
			m.prevEpoch, m.epoch = m.epoch, e
		}
	}
	switch {
	case len(revoke) > 0 && ownsAny(revoke):
		m.state = msUnrevoked
		setEpoch(epoch)
		c.setHoldings(m, keep, revoke)
		if prev.state != msUnrevoked || prev.epoch != m.epoch {
			m.rebalanceDeadline = now.Add(m.rebalanceTimeout)
			c.noteDeadline(m.rebalanceDeadline)
		}
	default:
		m.state = msStable
		if unreleased {
			m.state = msUnreleased
		}
		setEpoch(c.assignmentEpoch)
		c.setHoldings(m, keep.union(free), nil)
		m.rebalanceDeadline = time.Time{}
	}
	m.syncAssignedAt()
	if m.state != prev.state || m.epoch != prev.epoch || !m.assigned.equal(prev.assigned) || !m.pendingRevoke.equal(prev.pendingRevoke) {
		c.touch(m.id)
	}
}

// cgLeave handles epoch -1 (leave) and -2 (a static member leaving for a
// while: it keeps its partitions until its session ends or it returns).
func (g *Group) cgLeave(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	c := g.cg
	if c == nil {
		return cgError(kerr.UnknownMemberID, fmt.Sprintf("Group %s has no member %s.", g.id, req.MemberID))
	}
	var m *cgMember
	if req.InstanceID == nil {
		if m = c.members[req.MemberID]; m == nil {
			return cgError(kerr.UnknownMemberID, fmt.Sprintf("Member %s is not in group %s.", req.MemberID, g.id))
		}
	} else {
		if m = c.members[c.static[*req.InstanceID]]; m == nil {
			return cgError(kerr.UnknownMemberID, fmt.Sprintf("Instance id %s is unknown.", *req.InstanceID))
		}
		if m.id != req.MemberID {
			return cgError(kerr.FencedInstanceID, fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, m.id))
		}
	}
	if req.MemberEpoch == staticLeaveEpoch {
		if m.epoch != staticLeaveEpoch {
			m.prevEpoch = m.epoch
		}
		m.epoch = staticLeaveEpoch
		c.setHoldings(m, m.assigned, nil)
		m.syncAssignedAt()
		m.rebalanceDeadline = time.Time{}
		c.touch(m.id)
	} else {
		c.fence(m)
	}
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	id := req.MemberID
	resp.MemberID = &id
	resp.MemberEpoch = req.MemberEpoch
	return resp
}

// commitCheck answers, for one partition of a commit that passed the
// group-level checks, the error it gets (nil: taken).
type commitCheck func(topic string, topicID [16]byte, partition int32) *kerr.Error

// validateCommit is Kafka's ConsumerGroup.validateOffsetCommit with
// KIP-1251's assignment epochs: a commit at the member's current epoch is
// taken whole; one from an older epoch is taken for each partition the
// member still holds (assigned or being revoked) and was given at or
// before that epoch, and refused with stale for the rest. That lets a
// member commit what it processed while a heartbeat moved its epoch on
// (the commit of partitions being revoked, above all), and still fences
// a zombie's commits for partitions given to someone else.
func (c *consumerGroup) validateCommit(memberID string, epoch int32, versionOK bool, stale *kerr.Error) (*kerr.Error, commitCheck) {
	m := c.members[memberID]
	var memberEpoch int32
	if m != nil {
		memberEpoch = m.epoch
	}
	if err, done := memberCommitCheck(len(c.members) == 0, epoch, memberEpoch, m != nil, versionOK, stale); done {
		return err, nil
	}
	return nil, func(topic string, topicID [16]byte, partition int32) *kerr.Error {
		if topicID == ([16]byte{}) {
			t, ok := c.topics[topic]
			if !ok {
				return stale
			}
			topicID = t.id
		}
		if at, ok := m.assignedAt[partKey{topicID, partition}]; ok && at <= epoch {
			return nil
		}
		return stale
	}
}

func (c *consumerGroup) validateFetch(q FetchQuery) int16 {
	return memberFetchCheck(q, func(id string) (int32, bool) {
		if m := c.members[id]; m != nil {
			return m.epoch, true
		}
		return 0, false
	})
}

// recordCG persists what the step changed of the consumer group: the
// group record (epochs, subscription metadata) if it changed, a tombstone
// for each member gone, and a record for each member changed.
func (g *Group) recordCG() {
	c := g.cg
	if c == nil {
		return
	}
	if c.legacy {
		c.legacy = false
		c.dirty = true
		for id := range c.members {
			c.touch(id)
		}
	}
	if c.dirty {
		c.dirty = false
		g.record(Record{Kind: RecConsumerGroup, Group: g.id, CG: &cgSnapshot{raw: c.encode()}})
	}
	for _, id := range sortedKeys(c.gone) {
		g.record(Record{Kind: RecConsumerGroupMember, Group: g.id, Member: id})
	}
	for _, id := range sortedKeys(c.touched) {
		g.record(Record{Kind: RecConsumerGroupMember, Group: g.id, Member: id, CGM: &cgSnapshot{raw: c.encodeMember(id)}})
	}
	clear(c.gone)
	clear(c.touched)
}

func (g *Group) restoreConsumerGroup(s *cgSnapshot, members []*cgSnapshot, now time.Time) {
	if s == nil {
		g.cg = nil
		return
	}
	c, err := decodeConsumerGroup(s.raw)
	if err != nil {
		// readCGSnapshot validated it; a failure here is a bug.
		panic(fmt.Sprintf("consumer group %s: %v", g.id, err))
	}
	for _, ms := range members {
		m, target, err := decodeCGMember(ms.raw)
		if err != nil {
			// readCGMemberSnapshot validated it; a failure here is a bug.
			panic(fmt.Sprintf("consumer group %s member: %v", g.id, err))
		}
		c.putMember(cgMemberRead{m, target})
	}
	c.rebuildIndexes()
	for _, m := range c.members {
		m.sessionDeadline = now.Add(g.consumerSessionTimeout())
		if m.state == msUnrevoked {
			m.rebalanceDeadline = now.Add(m.rebalanceTimeout)
		}
	}
	c.floor.known = false
	g.live = true
	g.cg = c
	g.protocolType = "consumer"
	g.state = Empty
	g.stateSince = now
}

// ConsumerGroupDescribe answers one group of a ConsumerGroupDescribe.
func (g *Group) ConsumerGroupDescribe(now time.Time, ref Ref) Effects {
	resp := kmsg.NewPtrConsumerGroupDescribeResponse()
	out := kmsg.NewConsumerGroupDescribeResponseGroup()
	out.Group = g.id
	if g.cg == nil {
		out.ErrorCode = kerr.GroupIDNotFound.Code
		msg := fmt.Sprintf("Group %s not found.", g.id)
		if g.live {
			msg = fmt.Sprintf("Group %s is not a consumer group.", g.id)
		}
		out.ErrorMessage = &msg
	} else {
		c := g.cg
		out.State = c.state().String()
		out.Epoch = c.epoch
		out.AssignmentEpoch = c.assignmentEpoch
		out.AssignorName = c.preferredAssignor()
		names := map[[16]byte]string{}
		for _, t := range c.topics {
			names[t.id] = t.name
		}
		toAssignment := func(a assignment) kmsg.Assignment {
			var out kmsg.Assignment
			out.TopicPartitions = []kmsg.AssignmentTopicPartition{}
			for _, t := range topicsOf(a) {
				out.TopicPartitions = append(out.TopicPartitions, kmsg.AssignmentTopicPartition{TopicID: t, Topic: names[t], Partitions: slices.Clone(a[t])})
			}
			return out
		}
		for _, id := range c.sortedMembers() {
			m := c.members[id]
			dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			dm.MemberID, dm.InstanceID, dm.RackID = m.id, m.instanceID, m.rackID
			dm.MemberEpoch = m.epoch
			dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
			dm.SubscribedTopics = slices.Clone(m.subscribedNames)
			if dm.SubscribedTopics == nil {
				dm.SubscribedTopics = []string{}
			}
			dm.SubscribedTopicRegex = m.subscribedRegex
			dm.Assignment = toAssignment(m.assigned)
			dm.TargetAssignment = toAssignment(c.target[id])
			dm.MemberType = 1
			out.Members = append(out.Members, dm)
		}
	}
	resp.Groups = []kmsg.ConsumerGroupDescribeResponseGroup{out}
	g.reply(ref, resp)
	return g.take()
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
