package group

// KIP-1071 streams groups (StreamsGroupHeartbeat), following Kafka 4.3's
// GroupMetadataManager: the first member's topology initializes the group;
// the broker decides the internal topics' partition counts and asks the
// protocol layer to create the missing ones; the group epoch moves when
// membership, the topology's topic metadata or the assignment configs
// change; a sticky task assignor computes every member's target active and
// standby tasks; each member is reconciled towards its target on its own
// heartbeats, revoking first, and a task is handed over only once its
// previous owner released it. As in Kafka 4.3, static membership, warmup
// tasks, task offsets and source-topic regexes are refused.

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defaults of Kafka's streams group settings that Regent does not (yet)
// take as configs.
const (
	streamsAcceptableRecoveryLag = 10000
	streamsTaskOffsetInterval    = 60 * time.Second
)

type stEndpoint struct {
	Host string
	Port uint16
}

type stMember struct {
	id               string
	rackID           *string
	clientID         string
	clientHost       string
	processID        string
	endpoint         *stEndpoint
	clientTags       []streamsKV
	topologyEpoch    int32
	rebalanceTimeout time.Duration

	epoch, prevEpoch int32
	state            memberState
	active, standby  streamsTasks
	// pendingActive and pendingStandby are tasks being revoked: still
	// the member's until it reports them gone.
	pendingActive, pendingStandby streamsTasks
	// activeAt is each active task's assignment epoch (the member epoch
	// at which it was given), for commits from an older member epoch.
	activeAt map[stTask]int32

	sessionDeadline   time.Time
	rebalanceDeadline time.Time // while msUnrevoked
}

type stTask struct {
	sub  string
	part int32
}

// streamsGroup is a group's KIP-1071 state. Owned by the group's actor.
type streamsGroup struct {
	epoch           int32
	assignmentEpoch int32
	topology        *streamsTopology
	// configured is the topology configured against the broker's topics
	// at the last heartbeat (not persisted: recomputed).
	configured *streamsConfigured
	// metaFingerprint identifies the topic metadata the assignment was
	// computed for (partition counts of every topic the topology names);
	// a change moves the group epoch.
	metaFingerprint string
	// standbys is the num.standby.replicas the target was computed with.
	standbys int
	members  map[string]*stMember
	target   map[string]streamsTarget
	// endpointEpoch moves whenever a member with a user endpoint gets a
	// new assignment; members whose epoch differs get the whole
	// endpoint-to-partitions map (interactive queries).
	endpointEpoch int32
	// shutdownBy is the member that asked the application to shut down.
	shutdownBy string
	// dirty: the group record changed in this step; topologyDirty: the
	// topology; touched and gone: members whose records to write, or to
	// tombstone.
	dirty         bool
	topologyDirty bool
	touched, gone map[string]bool
}

// touch marks a member whose record the step must write.
func (s *streamsGroup) touch(id string) {
	if s.touched == nil {
		s.touched = map[string]bool{}
	}
	s.touched[id] = true
	delete(s.gone, id)
}

func newStreamsGroup() *streamsGroup {
	return &streamsGroup{members: map[string]*stMember{}, target: map[string]streamsTarget{}}
}

func (s *streamsGroup) state() State {
	switch {
	case len(s.members) == 0:
		return Empty
	case s.configured == nil || !s.configured.ready:
		return NotReady
	case s.epoch > s.assignmentEpoch:
		return Assigning
	}
	for _, m := range s.members {
		if m.epoch != s.assignmentEpoch || m.state != msStable {
			return Reconciling
		}
	}
	return Stable
}

func (s *streamsGroup) sortedMembers() []string {
	ids := make([]string, 0, len(s.members))
	for id := range s.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (s *streamsGroup) nextDeadline() time.Time {
	var next time.Time
	for _, m := range s.members {
		for _, t := range []time.Time{m.sessionDeadline, m.rebalanceDeadline} {
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	return next
}

// advance fences members whose session or revocation deadline passed.
func (s *streamsGroup) advance(now time.Time) {
	// One pass without sorting; only the members due are fenced, in id
	// order.
	var due []string
	for id, m := range s.members {
		if (!m.sessionDeadline.IsZero() && !now.Before(m.sessionDeadline)) ||
			(!m.rebalanceDeadline.IsZero() && !now.Before(m.rebalanceDeadline) && m.state == msUnrevoked) {
			due = append(due, id)
		}
	}
	sort.Strings(due)
	for _, id := range due {
		s.fence(s.members[id])
	}
}

// fence removes a member; the group epoch moves so that the others are
// given its tasks.
func (s *streamsGroup) fence(m *stMember) {
	delete(s.members, m.id)
	delete(s.target, m.id)
	delete(s.touched, m.id)
	if s.gone == nil {
		s.gone = map[string]bool{}
	}
	s.gone[m.id] = true
	if len(s.members) == 0 {
		// Kafka keeps a shutdown request while the group has members; a
		// fresh application after everyone left starts clean.
		s.shutdownBy = ""
	}
	s.epoch++
	s.dirty = true
}

// errStreamsInvalidTopology is Kafka's STREAMS_INVALID_TOPOLOGY (130),
// which franz-go's kerr does not name.
var errStreamsInvalidTopology = &kerr.Error{Message: "STREAMS_INVALID_TOPOLOGY", Code: 130, Description: "The supplied topology is invalid."}

func stError(err *kerr.Error, msg string) *kmsg.StreamsGroupHeartbeatResponse {
	resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	resp.ErrorCode = err.Code
	if msg != "" {
		resp.ErrorMessage = &msg
	}
	return resp
}

// validateSTHeartbeat is Kafka's request validation, the features Kafka
// 4.3 does not support first; nil if valid.
func validateSTHeartbeat(req *kmsg.StreamsGroupHeartbeatRequest) *kmsg.StreamsGroupHeartbeatResponse {
	bad := func(msg string) *kmsg.StreamsGroupHeartbeatResponse { return stError(kerr.InvalidRequest, msg) }
	switch {
	case req.InstanceID != nil:
		return bad("Static membership is not supported for streams groups.")
	case req.TaskOffsets != nil:
		return bad("TaskOffsets are not supported for streams groups.")
	case req.TaskEndOffsets != nil:
		return bad("TaskEndOffsets are not supported for streams groups.")
	case len(req.WarmupTasks) > 0:
		return bad("WarmupTasks are not supported for streams groups.")
	}
	if req.Topology != nil {
		for _, s := range req.Topology.Subtopologies {
			if len(s.SourceTopicRegex) > 0 {
				return bad("Regular expressions for source topics are not supported for streams groups.")
			}
		}
	}
	switch {
	case req.MemberID == "":
		return bad("MemberId can't be empty.")
	case req.Group == "":
		return bad("GroupId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return bad("RackId can't be empty.")
	}
	switch e := req.MemberEpoch; {
	case e == 0:
		if req.RebalanceTimeoutMillis == -1 {
			return bad("RebalanceTimeoutMs must be provided in first request.")
		}
		if len(req.ActiveTasks) > 0 || len(req.StandbyTasks) > 0 || len(req.WarmupTasks) > 0 {
			return bad("ActiveTasks, StandbyTasks and WarmupTasks must be empty when (re-)joining.")
		}
		if req.Topology == nil {
			return bad("Topology must be non-null when (re-)joining.")
		}
		if msg := invalidTopology(req.Topology); msg != "" {
			return bad(msg)
		}
		for _, s := range req.Topology.Subtopologies {
			for _, ti := range s.StateChangelogTopics {
				if ti.NumPartitions != 0 {
					// The broker gives a changelog one partition per
					// task; a topology that fixes it is refused, as Kafka
					// refuses it.
					return stError(errStreamsInvalidTopology, fmt.Sprintf("Changelog topic %s must leave its partition count to the broker, but it sets %d.", ti.Topic, ti.NumPartitions))
				}
			}
		}
	case e == staticLeaveEpoch:
		return bad("InstanceId can't be null.")
	case e < staticLeaveEpoch:
		return bad(fmt.Sprintf("MemberEpoch is %d, but must be greater than or equal to -2.", e))
	}
	if (req.ActiveTasks != nil || req.StandbyTasks != nil || req.WarmupTasks != nil) &&
		(req.ActiveTasks == nil || req.StandbyTasks == nil || req.WarmupTasks == nil) {
		return bad("If one task-type is non-null, all must be non-null.")
	}
	if req.MemberEpoch != 0 && req.Topology != nil {
		return bad("Topology can only be provided when (re-)joining.")
	}
	return nil
}

// maxTopologyBytes bounds a topology's size (its names and configs). Kafka
// writes a group's topology as one __consumer_offsets record, whose size
// the topic's 1 MiB max.message.bytes bounds; Regent keeps it in the
// group's state and rewrites it with the group, so it takes the same
// bound rather than whatever one request can carry.
const maxTopologyBytes = 1 << 20

// invalidTopology checks what the broker relies on: unique subtopology
// ids, copartition indexes in range, every subtopology reading a topic,
// and the size bound.
func invalidTopology(t *kmsg.StreamsGroupHeartbeatRequestTopology) string {
	if n := topologyBytes(t); n > maxTopologyBytes {
		return fmt.Sprintf("The topology takes %d bytes; at most %d are accepted.", n, maxTopologyBytes)
	}
	seen := map[string]bool{}
	for _, s := range t.Subtopologies {
		if seen[s.SubtopologyID] {
			return fmt.Sprintf("Duplicate subtopology id %q in the topology.", s.SubtopologyID)
		}
		seen[s.SubtopologyID] = true
		if len(s.SourceTopics)+len(s.RepartitionSourceTopics) == 0 {
			return fmt.Sprintf("Subtopology %s has no source topics.", s.SubtopologyID)
		}
		for _, g := range s.CopartitionGroups {
			for _, i := range g.SourceTopics {
				if i < 0 || int(i) >= len(s.SourceTopics) {
					return fmt.Sprintf("Subtopology %s has a copartition group with source topic index %d out of range.", s.SubtopologyID, i)
				}
			}
			for _, i := range g.RepartitionSourceTopics {
				if i < 0 || int(i) >= len(s.RepartitionSourceTopics) {
					return fmt.Sprintf("Subtopology %s has a copartition group with repartition source topic index %d out of range.", s.SubtopologyID, i)
				}
			}
		}
		for _, ti := range s.RepartitionSourceTopics {
			if ti.NumPartitions < 0 {
				return fmt.Sprintf("Internal topic %s has a negative partition count.", ti.Topic)
			}
		}
	}
	return ""
}

// StreamsTopicToCreate is an internal topic a streams group needs.
type StreamsTopicToCreate struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16 // -1: the broker's default
	Configs           map[string]string
}

// StreamsGroupHeartbeat handles a KIP-1071 heartbeat: join (epoch 0),
// heartbeat, or leave (-1).
func (g *Group) StreamsGroupHeartbeat(now time.Time, ref Ref, req *kmsg.StreamsGroupHeartbeatRequest, client Client, topics TopicSource) Effects {
	resp, create := g.stHeartbeat(now, req, client, topics)
	if resp.ErrorCode == 0 && req.MemberEpoch >= 0 {
		resp.HeartbeatIntervalMillis = int32(g.streamsHeartbeatInterval() / time.Millisecond)
		resp.AcceptableRecoveryLagLegacy = streamsAcceptableRecoveryLag
		resp.AcceptableRecoveryLag = streamsAcceptableRecoveryLag
		resp.TaskOffsetIntervalMillis = int32(streamsTaskOffsetInterval / time.Millisecond)
	}
	g.reply(ref, &StreamsReply{StreamsGroupHeartbeatResponse: resp, Create: create})
	g.advance(now)
	g.recordST()
	return g.take()
}

// topologyBytes is about what a topology takes encoded: its strings, and
// a few bytes for each entry and number.
func topologyBytes(t *kmsg.StreamsGroupHeartbeatRequestTopology) int {
	n := 0
	infos := func(ts []kmsg.TopicInfo) {
		for _, ti := range ts {
			n += len(ti.Topic) + 8
			for _, c := range ti.Configs {
				n += len(c.Key) + len(c.Value) + 4
			}
		}
	}
	for _, s := range t.Subtopologies {
		n += len(s.SubtopologyID) + 8
		for _, names := range [][]string{s.SourceTopics, s.SourceTopicRegex, s.RepartitionSinkTopics} {
			for _, name := range names {
				n += len(name) + 4
			}
		}
		infos(s.StateChangelogTopics)
		infos(s.RepartitionSourceTopics)
		for _, g := range s.CopartitionGroups {
			n += 2 * (len(g.SourceTopics) + len(g.SourceTopicRegex) + len(g.RepartitionSourceTopics))
		}
	}
	return n
}

// StreamsReply is a StreamsGroupHeartbeat's answer with the internal
// topics the protocol layer should create for the group; it travels the
// actor's reply path as the response it embeds.
type StreamsReply struct {
	*kmsg.StreamsGroupHeartbeatResponse
	Create []StreamsTopicToCreate
}

func (g *Group) stHeartbeat(now time.Time, req *kmsg.StreamsGroupHeartbeatRequest, client Client, topics TopicSource) (*kmsg.StreamsGroupHeartbeatResponse, []StreamsTopicToCreate) {
	if bad := validateSTHeartbeat(req); bad != nil {
		return bad, nil
	}
	if req.MemberEpoch == leaveEpoch {
		return g.stLeave(req), nil
	}
	if req.Topology != nil {
		// A topology no topics can make ready (undecidable partition
		// counts, conflicting declarations) is refused before anything
		// changes, the group's creation included, as Kafka refuses it.
		if conf := configureStreamsTopology(streamsTopologyFrom(req.Topology), topicCounts(topics)); conf.invalid {
			return stError(errStreamsInvalidTopology, conf.detail), nil
		}
	}
	if g.st == nil {
		switch {
		case g.cg != nil, g.sg != nil, g.live && (g.state != Empty || len(g.pending) > 0):
			return stError(kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a streams group.", g.id)), nil
		case req.MemberEpoch != 0:
			return stError(kerr.GroupIDNotFound, fmt.Sprintf("Streams group %s not found.", g.id)), nil
		}
		// A new group, or an empty classic group taken over (its offsets
		// stay).
		g.create(now)
		g.st = newStreamsGroup()
		g.protocolType = "streams"
		g.st.dirty = true
	}
	s := g.st
	m := s.members[req.MemberID]
	if m == nil && req.MemberEpoch != 0 {
		return stError(kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of streams group %s.", req.MemberID, g.id)), nil
	}
	if m == nil && len(s.members) >= g.cfg.MaxSize {
		return stError(kerr.GroupMaxSizeReached, fmt.Sprintf("The streams group has reached its maximum capacity of %d members.", g.cfg.MaxSize)), nil
	}
	ownedActive := streamsTasksFrom(req.ActiveTasks)
	ownedStandby := streamsTasksFrom(req.StandbyTasks)
	ownedSent := req.ActiveTasks != nil
	if m != nil {
		if bad := stCheckEpoch(m, req.MemberEpoch, ownedActive, ownedStandby, ownedSent); bad != nil {
			return bad, nil
		}
	}
	// The topology is decided before anything changes: a refused
	// joiner must leave no trace.
	var newTopology *streamsTopology
	if req.Topology != nil {
		t := streamsTopologyFrom(req.Topology)
		alone := len(s.members) == 0 || (len(s.members) == 1 && m != nil)
		switch {
		case s.topology == nil:
			newTopology = t
		case s.topology.epoch > t.epoch:
			// A member with an older topology: it is told so below.
		case !s.topology.equal(t):
			if !alone {
				return stError(kerr.InvalidRequest, "Topology updates are not supported yet."), nil
			}
			// Nobody else is left: the new topology takes over.
			newTopology = t
		}
	}
	bump := false
	if newTopology != nil {
		s.topology = newTopology
		s.topologyDirty = true
		bump = true
	}
	if m == nil {
		m = &stMember{id: req.MemberID}
		s.members[m.id] = m
		s.touch(m.id)
		bump = true
	}
	if g.updateSTMember(m, req, client) {
		bump = true
	}

	var status []kmsg.StreamsGroupHeartbeatResponseStatus
	if s.topology == nil {
		// A group gets its topology from its first join; only a store
		// that lost the topology record gets here. The member rejoins
		// with its topology.
		return stError(kerr.FencedMemberEpoch, fmt.Sprintf("Streams group %s has no topology; the member must rejoin.", g.id)), nil
	}
	if m.topologyEpoch < s.topology.epoch {
		status = append(status, kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: streamsStatusStaleTopology,
			StatusDetail: fmt.Sprintf("The member's topology epoch %d is behind the group's topology epoch %d.", m.topologyEpoch, s.topology.epoch)})
	}

	conf := configureStreamsTopology(s.topology, topicCounts(topics))
	s.configured = &conf
	if fp := conf.fingerprint(); fp != s.metaFingerprint {
		s.metaFingerprint = fp
		s.dirty = true
		bump = true
	}
	if conf.ready {
		for _, owned := range []streamsTasks{ownedActive, ownedStandby} {
			for sub, ps := range owned {
				n, ok := conf.tasks[sub]
				if !ok || ps[len(ps)-1] >= n || ps[0] < 0 {
					return stError(kerr.InvalidRequest, fmt.Sprintf("Member %s reports tasks of subtopology %s that the topology does not have.", m.id, sub)), nil
				}
			}
		}
	}
	if n := g.streamsStandbyReplicas(); n != s.standbys {
		s.standbys = n
		s.dirty = true
		bump = true
	}
	if bump {
		s.epoch++
		s.dirty = true
	}
	if s.epoch > s.assignmentEpoch {
		s.computeTarget()
	}
	before := struct{ active, standby streamsTasks }{m.active.union(nil), m.standby.union(nil)}
	s.reconcile(m, ownedActive, ownedStandby, ownedSent, now)
	m.sessionDeadline = now.Add(g.streamsSessionTimeout())
	if req.ShutdownApplication && s.shutdownBy == "" {
		s.shutdownBy = m.id
		s.dirty = true
	}

	resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	resp.MemberID = m.id
	resp.MemberEpoch = m.epoch
	if req.MemberEpoch == 0 || !before.active.equal(m.active) || !before.standby.equal(m.standby) {
		resp.ActiveTasks = tasksWire(m.active)
		resp.StandbyTasks = tasksWire(m.standby)
		resp.WarmupTasks = []kmsg.TaskIDs{}
		if m.endpoint != nil {
			s.endpointEpoch++
			s.dirty = true
		}
	}
	resp.EndpointInformationEpoch = s.endpointEpoch
	if req.EndpointInformationEpoch != s.endpointEpoch {
		resp.PartitionsByUserEndpoint = s.endpointPartitions(topics)
	}
	var create []StreamsTopicToCreate
	if !conf.ready {
		status = append(status, kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: conf.status, StatusDetail: conf.detail})
		for _, c := range conf.create {
			tc := StreamsTopicToCreate{Name: c.name, Partitions: c.partitions, ReplicationFactor: c.replicationFactor, Configs: map[string]string{}}
			if tc.ReplicationFactor == 0 {
				tc.ReplicationFactor = -1
			}
			for _, kv := range c.configs {
				tc.Configs[kv.key] = kv.value
			}
			create = append(create, tc)
		}
	}
	if s.shutdownBy != "" {
		status = append(status, kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: streamsStatusShutdownApplication,
			StatusDetail: fmt.Sprintf("Streams group member %s encountered a fatal error and requested a shutdown for the entire application.", s.shutdownBy)})
	}
	resp.Status = status
	return resp, create
}

// topicCounts reads partition counts from the broker's topics (none
// without a source).
func topicCounts(topics TopicSource) streamsTopicCount {
	return func(name string) (int32, bool) {
		if topics == nil {
			return 0, false
		}
		_, n, ok := topics.Topic(name)
		return n, ok
	}
}

// stCheckEpoch is Kafka's epoch validation: a member ahead of the
// coordinator, or behind it other than by one lost response (reporting a
// subset of what it holds), is fenced.
func stCheckEpoch(m *stMember, epoch int32, active, standby streamsTasks, ownedSent bool) *kmsg.StreamsGroupHeartbeatResponse {
	if epoch == 0 {
		return nil
	}
	fenced := func(rel string) *kmsg.StreamsGroupHeartbeatResponse {
		return stError(kerr.FencedMemberEpoch, fmt.Sprintf("The streams group member has a %s member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its tasks and rejoin.", rel, epoch, m.epoch))
	}
	switch {
	case epoch > m.epoch:
		return fenced("greater")
	case epoch < m.epoch:
		if epoch != m.prevEpoch || !ownedSent || len(active.minus(m.active)) > 0 || len(standby.minus(m.standby)) > 0 {
			return fenced("smaller")
		}
	}
	return nil
}

// updateSTMember takes the request's fields (null: unchanged); true if a
// change moves the group epoch (a new process, rack or endpoint changes
// where tasks should go).
func (g *Group) updateSTMember(m *stMember, req *kmsg.StreamsGroupHeartbeatRequest, client Client) bool {
	s := g.st
	bump := false
	if req.RackID != nil && (m.rackID == nil || *m.rackID != *req.RackID) {
		m.rackID = cloneStr(req.RackID)
		s.touch(m.id)
		bump = true
	}
	if req.RebalanceTimeoutMillis != -1 && ms(req.RebalanceTimeoutMillis) != m.rebalanceTimeout {
		m.rebalanceTimeout = ms(req.RebalanceTimeoutMillis)
		s.touch(m.id)
	}
	if req.Topology != nil && req.Topology.Epoch != m.topologyEpoch {
		m.topologyEpoch = req.Topology.Epoch
		s.touch(m.id)
		bump = true
	}
	if req.ProcessID != nil && *req.ProcessID != m.processID {
		m.processID = *req.ProcessID
		s.touch(m.id)
		bump = true
	}
	if req.UserEndpoint != nil {
		e := &stEndpoint{Host: req.UserEndpoint.Host, Port: req.UserEndpoint.Port}
		if m.endpoint == nil || *m.endpoint != *e {
			m.endpoint = e
			s.touch(m.id)
			bump = true
		}
	}
	if req.ClientTags != nil {
		var tags []streamsKV
		for _, t := range req.ClientTags {
			tags = append(tags, streamsKV{t.Key, t.Value})
		}
		sort.Slice(tags, func(a, b int) bool { return tags[a].key < tags[b].key })
		if !slices.Equal(tags, m.clientTags) {
			m.clientTags = tags
			s.touch(m.id)
			bump = true
		}
	}
	if m.clientID != client.ID || m.clientHost != client.Host {
		m.clientID, m.clientHost = client.ID, client.Host
		s.touch(m.id)
	}
	return bump
}

// computeTarget runs the assignor for the current group epoch. Until the
// topology is ready every member's target is empty.
func (s *streamsGroup) computeTarget() {
	ids := s.sortedMembers()
	target := map[string]streamsTarget{}
	if s.configured != nil && s.configured.ready {
		in := streamsAssignInput{tasks: s.configured.tasks, stateful: map[string]bool{}, numStandbyReplicas: s.standbys}
		for i := range s.topology.subtopologies {
			st := &s.topology.subtopologies[i]
			in.stateful[st.id] = st.stateful()
		}
		for _, id := range ids {
			m := s.members[id]
			in.members = append(in.members, streamsAssignMember{id: id, processID: m.processID,
				prevActive: m.active.union(m.pendingActive), prevStandby: m.standby.union(m.pendingStandby)})
		}
		target = assignStreamsTasks(in)
	}
	old := s.target
	s.target = make(map[string]streamsTarget, len(ids))
	for _, id := range ids {
		s.target[id] = target[id]
		if o := old[id]; !o.active.equal(target[id].active) || !o.standby.equal(target[id].standby) {
			s.touch(id)
		}
	}
	s.assignmentEpoch = s.epoch
	s.dirty = true
}

// owners indexes who holds each task now (assigned or being revoked):
// the active task's member and the processes holding it as a standby.
type stOwners struct {
	active  map[stTask]string          // member id
	standby map[stTask]map[string]bool // process ids
}

func (s *streamsGroup) owners(except string) stOwners {
	o := stOwners{active: map[stTask]string{}, standby: map[stTask]map[string]bool{}}
	for id, m := range s.members {
		if id == except {
			continue
		}
		for _, a := range []streamsTasks{m.active, m.pendingActive} {
			for sub, ps := range a {
				for _, p := range ps {
					o.active[stTask{sub, p}] = id
				}
			}
		}
		for _, a := range []streamsTasks{m.standby, m.pendingStandby} {
			for sub, ps := range a {
				for _, p := range ps {
					k := stTask{sub, p}
					if o.standby[k] == nil {
						o.standby[k] = map[string]bool{}
					}
					o.standby[k][m.processID] = true
				}
			}
		}
	}
	return o
}

// reconcile moves m towards its target (Kafka's CurrentAssignmentBuilder
// for streams): tasks to revoke first; then tasks to gain once released —
// an active task while another member holds it as active, or while this
// member's process still holds it as a standby; a standby task while this
// member's process holds it as active or standby elsewhere.
func (s *streamsGroup) reconcile(m *stMember, ownedActive, ownedStandby streamsTasks, ownedSent bool, now time.Time) {
	target := s.target[m.id]
	ownsAny := func(active, standby streamsTasks) bool {
		return !ownedSent || ownedActive.overlaps(active) || ownedStandby.overlaps(standby)
	}
	switch m.state {
	case msStable:
		if m.epoch == s.assignmentEpoch {
			return
		}
		s.nextAssignment(m, m.epoch, target, ownsAny, now)
	case msUnrevoked:
		if ownsAny(m.pendingActive, m.pendingStandby) {
			return
		}
		s.nextAssignment(m, min(m.epoch+1, s.assignmentEpoch), target, ownsAny, now)
	case msUnreleased:
		s.nextAssignment(m, m.epoch, target, ownsAny, now)
	}
}

func (s *streamsGroup) nextAssignment(m *stMember, epoch int32, target streamsTarget, ownsAny func(a, b streamsTasks) bool, now time.Time) {
	o := s.owners(m.id)
	keepA, keepS := m.active.intersect(target.active), m.standby.intersect(target.standby)
	revokeA, revokeS := m.active.minus(keepA), m.standby.minus(keepS)
	wantA, wantS := target.active.minus(keepA), target.standby.minus(keepS)
	var freeA, freeS streamsTasks
	unreleased := false
	for sub, ps := range wantA {
		for _, p := range ps {
			k := stTask{sub, p}
			if _, held := o.active[k]; held || o.standby[k][m.processID] {
				unreleased = true
				continue
			}
			freeA = freeA.add(sub, p)
		}
	}
	for sub, ps := range wantS {
		for _, p := range ps {
			k := stTask{sub, p}
			if owner, held := o.active[k]; (held && s.members[owner].processID == m.processID) || o.standby[k][m.processID] {
				unreleased = true
				continue
			}
			freeS = freeS.add(sub, p)
		}
	}
	prev := *m
	setEpoch := func(e int32) {
		if m.epoch != e {
			m.prevEpoch, m.epoch = m.epoch, e
		}
	}
	if (len(revokeA) > 0 || len(revokeS) > 0) && ownsAny(revokeA, revokeS) {
		m.state = msUnrevoked
		setEpoch(epoch)
		m.active, m.standby = keepA, keepS
		m.pendingActive, m.pendingStandby = revokeA, revokeS
		if prev.state != msUnrevoked || prev.epoch != m.epoch {
			m.rebalanceDeadline = now.Add(m.rebalanceTimeout)
		}
	} else {
		m.state = msStable
		if unreleased {
			m.state = msUnreleased
		}
		setEpoch(s.assignmentEpoch)
		m.active, m.standby = keepA.union(freeA), keepS.union(freeS)
		m.pendingActive, m.pendingStandby = nil, nil
		m.rebalanceDeadline = time.Time{}
	}
	m.syncActiveAt()
	if m.state != prev.state || m.epoch != prev.epoch || !m.active.equal(prev.active) || !m.standby.equal(prev.standby) ||
		!m.pendingActive.equal(prev.pendingActive) || !m.pendingStandby.equal(prev.pendingStandby) {
		s.touch(m.id)
	}
}

// syncActiveAt gives every active task held without an assignment epoch
// the member's current epoch, and forgets tasks no longer held.
func (m *stMember) syncActiveAt() {
	held := make(map[stTask]int32, m.active.count()+m.pendingActive.count())
	for _, a := range []streamsTasks{m.active, m.pendingActive} {
		for sub, ps := range a {
			for _, p := range ps {
				k := stTask{sub, p}
				e, ok := m.activeAt[k]
				if !ok {
					e = m.epoch
				}
				held[k] = e
			}
		}
	}
	m.activeAt = held
}

// stLeave handles epoch -1: the member leaves and its tasks are given to
// the others.
func (g *Group) stLeave(req *kmsg.StreamsGroupHeartbeatRequest) *kmsg.StreamsGroupHeartbeatResponse {
	s := g.st
	if s == nil {
		return stError(kerr.GroupIDNotFound, fmt.Sprintf("Streams group %s not found.", g.id))
	}
	m := s.members[req.MemberID]
	if m == nil {
		return stError(kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of streams group %s.", req.MemberID, g.id))
	}
	s.fence(m)
	resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	resp.MemberID = req.MemberID
	resp.MemberEpoch = leaveEpoch
	return resp
}

// endpointPartitions maps every member's user endpoint to the source
// partitions of its active and standby tasks (interactive queries).
func (s *streamsGroup) endpointPartitions(topics TopicSource) []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint {
	out := []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint{}
	if s.configured == nil || !s.configured.ready {
		return out
	}
	parts := func(tasks streamsTasks) map[string][]int32 {
		byTopic := map[string][]int32{}
		for sub, ps := range tasks {
			for _, topic := range s.configured.sources[sub] {
				n := int32(0)
				if topics != nil {
					_, n, _ = topics.Topic(topic)
				}
				for _, p := range ps {
					if p < n {
						byTopic[topic] = append(byTopic[topic], p)
					}
				}
			}
		}
		for t := range byTopic {
			slices.Sort(byTopic[t])
			byTopic[t] = slices.Compact(byTopic[t])
		}
		return byTopic
	}
	for _, id := range s.sortedMembers() {
		m := s.members[id]
		if m.endpoint == nil {
			continue
		}
		e := kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint{UserEndpoint: kmsg.Endpoint{Host: m.endpoint.Host, Port: m.endpoint.Port}}
		e.ActivePartitions = []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointActivePartition{}
		e.StandbyPartitions = []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointStandbyPartition{}
		active := parts(m.active.union(m.pendingActive))
		for _, t := range sortedKeys(active) {
			e.ActivePartitions = append(e.ActivePartitions, kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointActivePartition{Topic: t, Partitions: active[t]})
		}
		standby := parts(m.standby)
		for _, t := range sortedKeys(standby) {
			e.StandbyPartitions = append(e.StandbyPartitions, kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointStandbyPartition{Topic: t, Partitions: standby[t]})
		}
		out = append(out, e)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// validateCommit is the streams form of the consumer group's check: a
// commit at the member's epoch is taken; one from an older epoch is taken
// for the partitions of active tasks the member was given at or before
// it; others are stale.
func (s *streamsGroup) validateCommit(memberID string, epoch int32, versionOK bool, stale *kerr.Error) (*kerr.Error, commitCheck) {
	m := s.members[memberID]
	var memberEpoch int32
	if m != nil {
		memberEpoch = m.epoch
	}
	if err, done := memberCommitCheck(len(s.members) == 0, epoch, memberEpoch, m != nil, versionOK, stale); done {
		return err, nil
	}
	return nil, func(topic string, _ [16]byte, partition int32) *kerr.Error {
		if s.configured == nil {
			return stale
		}
		for sub, topics := range s.configured.sources {
			if !slices.Contains(topics, topic) {
				continue
			}
			if at, ok := m.activeAt[stTask{sub, partition}]; ok && at <= epoch {
				return nil
			}
		}
		return stale
	}
}

func (s *streamsGroup) validateFetch(q FetchQuery) int16 {
	return memberFetchCheck(q, func(id string) (int32, bool) {
		if m := s.members[id]; m != nil {
			return m.epoch, true
		}
		return 0, false
	})
}

// subscribes reports whether the topology reads or writes topic.
func (s *streamsGroup) subscribes(topic string) bool {
	if s.topology == nil {
		return false
	}
	for _, st := range s.topology.subtopologies {
		if slices.Contains(st.sourceTopics, topic) || slices.Contains(st.repartitionSinkTopics, topic) {
			return true
		}
		for _, ti := range st.repartitionSourceTopics {
			if ti.name == topic {
				return true
			}
		}
	}
	return false
}

// equal compares two topologies (epoch aside).
func (t *streamsTopology) equal(o *streamsTopology) bool {
	if len(t.subtopologies) != len(o.subtopologies) {
		return false
	}
	for i := range t.subtopologies {
		a, b := &t.subtopologies[i], &o.subtopologies[i]
		if a.id != b.id || !slices.Equal(a.sourceTopics, b.sourceTopics) || !slices.Equal(a.repartitionSinkTopics, b.repartitionSinkTopics) ||
			!topicInfosEqual(a.repartitionSourceTopics, b.repartitionSourceTopics) || !topicInfosEqual(a.stateChangelogTopics, b.stateChangelogTopics) ||
			len(a.copartitionGroups) != len(b.copartitionGroups) {
			return false
		}
		for j := range a.copartitionGroups {
			if !slices.Equal(a.copartitionGroups[j].sourceTopics, b.copartitionGroups[j].sourceTopics) ||
				!slices.Equal(a.copartitionGroups[j].repartitionSourceTopics, b.copartitionGroups[j].repartitionSourceTopics) {
				return false
			}
		}
	}
	return true
}

func topicInfosEqual(a, b []streamsTopicInfo) bool {
	return slices.EqualFunc(a, b, func(x, y streamsTopicInfo) bool {
		return x.name == y.name && x.partitions == y.partitions && x.replicationFactor == y.replicationFactor && slices.Equal(x.configs, y.configs)
	})
}

// fingerprint identifies what the assignment depends on in the broker's
// topics: readiness and every subtopology's task count.
func (c *streamsConfigured) fingerprint() string {
	if !c.ready {
		return fmt.Sprintf("not-ready:%d", c.status)
	}
	out := "ready"
	for _, sub := range sortedKeys(c.tasks) {
		out += fmt.Sprintf(";%s=%d", sub, c.tasks[sub])
	}
	return out
}

// recordST persists what the step changed of the streams group: its
// group record, its topology, a tombstone per member gone and a record per
// member changed.
func (g *Group) recordST() {
	s := g.st
	if s == nil {
		return
	}
	if s.dirty {
		s.dirty = false
		g.record(Record{Kind: RecStreamsGroup, Group: g.id, ST: &stSnapshot{raw: s.encode()}})
	}
	if s.topologyDirty && s.topology != nil {
		s.topologyDirty = false
		g.record(Record{Kind: RecStreamsTopology, Group: g.id, ST: &stSnapshot{raw: s.encodeTopology()}})
	}
	for _, id := range sortedKeys(s.gone) {
		g.record(Record{Kind: RecStreamsMember, Group: g.id, Member: id})
	}
	for _, id := range sortedKeys(s.touched) {
		g.record(Record{Kind: RecStreamsMember, Group: g.id, Member: id, ST: &stSnapshot{raw: s.encodeMember(id)}})
	}
	clear(s.gone)
	clear(s.touched)
}

func (g *Group) restoreStreamsGroup(snap, topology *stSnapshot, members []*stSnapshot, now time.Time) {
	if snap == nil {
		g.st = nil
		return
	}
	// readSTSnapshot validated every record; a failure here is a bug.
	s, err := decodeStreamsGroup(snap.raw)
	if err != nil {
		panic(fmt.Sprintf("streams group %s: %v", g.id, err))
	}
	if topology != nil {
		if s.topology, err = decodeStreamsTopology(topology.raw); err != nil {
			panic(fmt.Sprintf("streams group %s topology: %v", g.id, err))
		}
	}
	for _, ms := range members {
		m, t, err := decodeStreamsMember(ms.raw)
		if err != nil {
			panic(fmt.Sprintf("streams group %s member: %v", g.id, err))
		}
		s.members[m.id] = m
		if t.active != nil || t.standby != nil {
			s.target[m.id] = t
		}
	}
	for _, m := range s.members {
		m.sessionDeadline = now.Add(g.streamsSessionTimeout())
		if m.state == msUnrevoked {
			m.rebalanceDeadline = now.Add(m.rebalanceTimeout)
		}
	}
	g.live = true
	g.st = s
	g.protocolType = "streams"
	g.state = Empty
	g.stateSince = now
}
