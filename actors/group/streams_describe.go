package group

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StreamsGroupDescribe answers one group of a StreamsGroupDescribe: the
// group's epochs and topology, and every member with its process,
// endpoint, current and target tasks.
func (g *Group) StreamsGroupDescribe(now time.Time, ref Ref) Effects {
	resp := kmsg.NewPtrStreamsGroupDescribeResponse()
	out := kmsg.NewStreamsGroupDescribeResponseGroup()
	out.Group = g.id
	if g.st == nil {
		out.ErrorCode = kerr.GroupIDNotFound.Code
		msg := fmt.Sprintf("Group %s not found.", g.id)
		if g.live {
			msg = fmt.Sprintf("Group %s is not a streams group.", g.id)
		}
		out.ErrorMessage = &msg
	} else {
		s := g.st
		out.State = s.state().String()
		out.Epoch = s.epoch
		out.AssignmentEpoch = s.assignmentEpoch
		assignor := "sticky"
		out.AssignorName = &assignor
		if t := s.topology; t != nil {
			dt := &kmsg.StreamsGroupDescribeResponseGroupTopology{Epoch: t.epoch}
			for _, st := range t.subtopologies {
				ds := kmsg.NewStreamsGroupDescribeResponseGroupTopologySubtopology()
				ds.SubtopologyID = st.id
				ds.SourceTopics = append([]string{}, st.sourceTopics...)
				ds.RepartitionSinkTopics = append([]string{}, st.repartitionSinkTopics...)
				ds.StateChangelogTopics = describeTopicInfos(st.stateChangelogTopics)
				ds.RepartitionSourceTopics = describeTopicInfos(st.repartitionSourceTopics)
				dt.Subtopologies = append(dt.Subtopologies, ds)
			}
			out.Topology = dt
		}
		for _, id := range s.sortedMembers() {
			m := s.members[id]
			dm := kmsg.NewStreamsGroupDescribeResponseGroupMember()
			dm.MemberID, dm.MemberEpoch, dm.RackID = m.id, m.epoch, m.rackID
			dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
			dm.TopologyEpoch, dm.ProcessID = m.topologyEpoch, m.processID
			if m.endpoint != nil {
				dm.UserEndpoint = &kmsg.StreamsGroupDescribeResponseGroupMemberUserEndpoint{Host: m.endpoint.Host, Port: m.endpoint.Port}
			}
			dm.ClientTags = []kmsg.StreamsGroupDescribeResponseGroupMemberClientTag{}
			for _, kv := range m.clientTags {
				dm.ClientTags = append(dm.ClientTags, kmsg.StreamsGroupDescribeResponseGroupMemberClientTag{Key: kv.key, Value: kv.value})
			}
			dm.TaskOffsets, dm.TaskEndOffsets = []kmsg.TaskOffset{}, []kmsg.TaskOffset{}
			dm.Assignment = kmsg.StreamsAssignment{ActiveTasks: tasksWire(m.active), StandbyTasks: tasksWire(m.standby), WarmupTasks: []kmsg.TaskIDs{}}
			t := s.target[id]
			dm.TargetAssignment = kmsg.StreamsAssignment{ActiveTasks: tasksWire(t.active), StandbyTasks: tasksWire(t.standby), WarmupTasks: []kmsg.TaskIDs{}}
			out.Members = append(out.Members, dm)
		}
		if out.Members == nil {
			out.Members = []kmsg.StreamsGroupDescribeResponseGroupMember{}
		}
	}
	resp.Groups = []kmsg.StreamsGroupDescribeResponseGroup{out}
	g.reply(ref, resp)
	return g.take()
}

func describeTopicInfos(ts []streamsTopicInfo) []kmsg.TopicInfo {
	out := []kmsg.TopicInfo{}
	for _, t := range ts {
		ti := kmsg.NewTopicInfo()
		ti.Topic, ti.NumPartitions, ti.ReplicationFactor = t.name, t.partitions, t.replicationFactor
		for _, kv := range t.configs {
			ti.Configs = append(ti.Configs, kmsg.TopicInfoConfig{Key: kv.key, Value: kv.value})
		}
		out = append(out, ti)
	}
	return out
}
