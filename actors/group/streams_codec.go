package group

// The persisted form of a streams group's state, as versioned JSON in
// three kinds of record, as Kafka splits its own: the group (epochs,
// configured topology, settings), the topology (written when it is set),
// and one per member (the member and its target), so a heartbeat that
// changes one member writes that member. Streams groups change at
// rebalances, not per record, and their state is nested (topology, task
// sets), so a self-describing encoding is worth its bytes here.

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

const stCodecVersion = 1

// stSnapshot holds an encoded streams group (encoded when the record is
// made, so later changes to the group cannot race with the write).
type stSnapshot struct{ raw []byte }

type stJSON struct {
	Version         int               `json:"v"`
	Epoch           int32             `json:"epoch"`
	AssignmentEpoch int32             `json:"assignmentEpoch"`
	Fingerprint     string            `json:"fingerprint"`
	Standbys        int               `json:"standbys"`
	EndpointEpoch   int32             `json:"endpointEpoch"`
	ShutdownBy      string            `json:"shutdownBy,omitempty"`
	Configured      *stConfiguredJSON `json:"configured,omitempty"`
}

// stConfiguredJSON is the topology as last configured against the broker's
// topics: kept so a restored group reports its state and validates
// commits as before, until a heartbeat configures it again.
type stConfiguredJSON struct {
	Ready   bool                `json:"ready"`
	Status  int8                `json:"status"`
	Detail  string              `json:"detail,omitempty"`
	Tasks   map[string]int32    `json:"tasks,omitempty"`
	Sources map[string][]string `json:"sources,omitempty"`
}

type stTopologyJSON struct {
	Version       int                 `json:"v"`
	Epoch         int32               `json:"epoch"`
	Subtopologies []stSubtopologyJSON `json:"subtopologies"`
}

type stSubtopologyJSON struct {
	ID                      string            `json:"id"`
	SourceTopics            []string          `json:"sources"`
	RepartitionSinkTopics   []string          `json:"repartitionSinks,omitempty"`
	RepartitionSourceTopics []stTopicInfoJSON `json:"repartitionSources,omitempty"`
	StateChangelogTopics    []stTopicInfoJSON `json:"changelogs,omitempty"`
	CopartitionGroups       []stCopartJSON    `json:"copartitionGroups,omitempty"`
}

type stTopicInfoJSON struct {
	Name              string      `json:"name"`
	Partitions        int32       `json:"partitions"`
	ReplicationFactor int16       `json:"replicationFactor"`
	Configs           [][2]string `json:"configs,omitempty"`
}

type stCopartJSON struct {
	SourceTopics            []int16 `json:"sources,omitempty"`
	RepartitionSourceTopics []int16 `json:"repartitionSources,omitempty"`
}

type stMemberJSON struct {
	Version            int               `json:"v"`
	ID                 string            `json:"id"`
	RackID             *string           `json:"rack,omitempty"`
	ClientID           string            `json:"clientId"`
	ClientHost         string            `json:"clientHost"`
	ProcessID          string            `json:"processId"`
	Endpoint           *stEndpoint       `json:"endpoint,omitempty"`
	ClientTags         [][2]string       `json:"clientTags,omitempty"`
	TopologyEpoch      int32             `json:"topologyEpoch"`
	RebalanceTimeoutMs int64             `json:"rebalanceTimeoutMs"`
	Epoch              int32             `json:"epoch"`
	PrevEpoch          int32             `json:"prevEpoch"`
	State              memberState       `json:"state"`
	Active             streamsTasks      `json:"active,omitempty"`
	Standby            streamsTasks      `json:"standby,omitempty"`
	PendingActive      streamsTasks      `json:"pendingActive,omitempty"`
	PendingStandby     streamsTasks      `json:"pendingStandby,omitempty"`
	ActiveAt           []stTaskEpochJSON `json:"activeAt,omitempty"`
	Target             stTargetJSON      `json:"target"`
}

type stTaskEpochJSON struct {
	Sub   string `json:"s"`
	Part  int32  `json:"p"`
	Epoch int32  `json:"e"`
}

type stTargetJSON struct {
	Active  streamsTasks `json:"active,omitempty"`
	Standby streamsTasks `json:"standby,omitempty"`
}

func kvsJSON(kvs []streamsKV) [][2]string {
	var out [][2]string
	for _, kv := range kvs {
		out = append(out, [2]string{kv.key, kv.value})
	}
	return out
}

func kvsFromJSON(in [][2]string) []streamsKV {
	var out []streamsKV
	for _, kv := range in {
		out = append(out, streamsKV{kv[0], kv[1]})
	}
	return out
}

func topicInfosJSON(ts []streamsTopicInfo) []stTopicInfoJSON {
	var out []stTopicInfoJSON
	for _, t := range ts {
		out = append(out, stTopicInfoJSON{Name: t.name, Partitions: t.partitions, ReplicationFactor: t.replicationFactor, Configs: kvsJSON(t.configs)})
	}
	return out
}

func topicInfosFromJSON(in []stTopicInfoJSON) []streamsTopicInfo {
	var out []streamsTopicInfo
	for _, t := range in {
		out = append(out, streamsTopicInfo{name: t.Name, partitions: t.Partitions, replicationFactor: t.ReplicationFactor, configs: kvsFromJSON(t.Configs)})
	}
	return out
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Every field is a plain value: a failure is a bug.
		panic(fmt.Sprintf("encode streams group: %v", err))
	}
	return b
}

// encode is the group record: epochs, settings, the configured topology.
func (s *streamsGroup) encode() []byte {
	out := stJSON{Version: stCodecVersion, Epoch: s.epoch, AssignmentEpoch: s.assignmentEpoch, Fingerprint: s.metaFingerprint,
		Standbys: s.standbys, EndpointEpoch: s.endpointEpoch, ShutdownBy: s.shutdownBy}
	if c := s.configured; c != nil {
		out.Configured = &stConfiguredJSON{Ready: c.ready, Status: c.status, Detail: c.detail, Tasks: c.tasks, Sources: c.sources}
	}
	return mustJSON(out)
}

// encodeTopology is the topology record.
func (s *streamsGroup) encodeTopology() []byte {
	t := s.topology
	out := stTopologyJSON{Version: stCodecVersion, Epoch: t.epoch}
	for _, st := range t.subtopologies {
		sj := stSubtopologyJSON{ID: st.id, SourceTopics: st.sourceTopics, RepartitionSinkTopics: st.repartitionSinkTopics,
			RepartitionSourceTopics: topicInfosJSON(st.repartitionSourceTopics), StateChangelogTopics: topicInfosJSON(st.stateChangelogTopics)}
		for _, g := range st.copartitionGroups {
			sj.CopartitionGroups = append(sj.CopartitionGroups, stCopartJSON{SourceTopics: g.sourceTopics, RepartitionSourceTopics: g.repartitionSourceTopics})
		}
		out.Subtopologies = append(out.Subtopologies, sj)
	}
	return mustJSON(out)
}

// encodeMember is a member's record, with its target.
func (s *streamsGroup) encodeMember(id string) []byte {
	m := s.members[id]
	t := s.target[id]
	mj := stMemberJSON{Version: stCodecVersion, ID: m.id, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost, ProcessID: m.processID,
		Endpoint: m.endpoint, ClientTags: kvsJSON(m.clientTags), TopologyEpoch: m.topologyEpoch,
		RebalanceTimeoutMs: m.rebalanceTimeout.Milliseconds(), Epoch: m.epoch, PrevEpoch: m.prevEpoch, State: m.state,
		Active: m.active, Standby: m.standby, PendingActive: m.pendingActive, PendingStandby: m.pendingStandby,
		Target: stTargetJSON{Active: t.active, Standby: t.standby}}
	for _, a := range []streamsTasks{m.active, m.pendingActive} {
		for _, sub := range subtopologiesOf(a) {
			for _, p := range a[sub] {
				mj.ActiveAt = append(mj.ActiveAt, stTaskEpochJSON{Sub: sub, Part: p, Epoch: m.activeAt[stTask{sub, p}]})
			}
		}
	}
	return mustJSON(mj)
}

func decodeStreamsGroup(b []byte) (*streamsGroup, error) {
	var in stJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("streams group: %w", err)
	}
	if in.Version != stCodecVersion {
		return nil, fmt.Errorf("streams group: unknown version %d", in.Version)
	}
	s := newStreamsGroup()
	s.epoch, s.assignmentEpoch, s.metaFingerprint = in.Epoch, in.AssignmentEpoch, in.Fingerprint
	s.standbys, s.endpointEpoch, s.shutdownBy = in.Standbys, in.EndpointEpoch, in.ShutdownBy
	if c := in.Configured; c != nil {
		s.configured = &streamsConfigured{ready: c.Ready, status: c.Status, detail: c.Detail, tasks: c.Tasks, sources: c.Sources}
	}
	return s, nil
}

func decodeStreamsTopology(b []byte) (*streamsTopology, error) {
	var in stTopologyJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("streams topology: %w", err)
	}
	if in.Version != stCodecVersion {
		return nil, fmt.Errorf("streams topology: unknown version %d", in.Version)
	}
	t := &streamsTopology{epoch: in.Epoch}
	for _, sj := range in.Subtopologies {
		st := streamsSubtopology{id: sj.ID, sourceTopics: sj.SourceTopics, repartitionSinkTopics: sj.RepartitionSinkTopics,
			repartitionSourceTopics: topicInfosFromJSON(sj.RepartitionSourceTopics), stateChangelogTopics: topicInfosFromJSON(sj.StateChangelogTopics)}
		for _, g := range sj.CopartitionGroups {
			st.copartitionGroups = append(st.copartitionGroups, streamsCopartitionGroup{sourceTopics: g.SourceTopics, repartitionSourceTopics: g.RepartitionSourceTopics})
		}
		t.subtopologies = append(t.subtopologies, st)
	}
	return t, nil
}

func decodeStreamsMember(b []byte) (*stMember, streamsTarget, error) {
	var mj stMemberJSON
	if err := json.Unmarshal(b, &mj); err != nil {
		return nil, streamsTarget{}, fmt.Errorf("streams group member: %w", err)
	}
	if mj.Version != stCodecVersion {
		return nil, streamsTarget{}, fmt.Errorf("streams group member: unknown version %d", mj.Version)
	}
	if mj.ID == "" {
		return nil, streamsTarget{}, errors.New("streams group member without an id")
	}
	m := &stMember{id: mj.ID, rackID: mj.RackID, clientID: mj.ClientID, clientHost: mj.ClientHost, processID: mj.ProcessID,
		endpoint: mj.Endpoint, clientTags: kvsFromJSON(mj.ClientTags), topologyEpoch: mj.TopologyEpoch,
		rebalanceTimeout: time.Duration(mj.RebalanceTimeoutMs) * time.Millisecond, epoch: mj.Epoch, prevEpoch: mj.PrevEpoch,
		state: mj.State, active: mj.Active, standby: mj.Standby, pendingActive: mj.PendingActive, pendingStandby: mj.PendingStandby,
		activeAt: map[stTask]int32{}}
	for _, a := range mj.ActiveAt {
		m.activeAt[stTask{a.Sub, a.Part}] = a.Epoch
	}
	return m, streamsTarget{active: mj.Target.Active, standby: mj.Target.Standby}, nil
}

// readSTSnapshot checks a record value of kind k before the store keeps it.
func readSTSnapshot(k RecordKind, b []byte) (*stSnapshot, error) {
	var err error
	switch k {
	case RecStreamsGroup:
		_, err = decodeStreamsGroup(b)
	case RecStreamsTopology:
		_, err = decodeStreamsTopology(b)
	case RecStreamsMember:
		_, _, err = decodeStreamsMember(b)
	}
	if err != nil {
		return nil, err
	}
	return &stSnapshot{raw: append([]byte(nil), b...)}, nil
}
