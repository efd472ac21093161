package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Summary is what ListGroups shows of a group.
type Summary struct {
	Group        string
	ProtocolType string
	State        string
	Type         string // "classic", "consumer", "share" or "streams"
}

// Summary describes the group for ListGroups; ok is false if the group
// does not exist.
func (g *Group) Summary() (Summary, bool) {
	if !g.live {
		return Summary{}, false
	}
	if g.cg != nil {
		return Summary{Group: g.id, ProtocolType: "consumer", State: g.cg.state().String(), Type: "consumer"}, true
	}
	if g.sg != nil {
		return Summary{Group: g.id, ProtocolType: "share", State: g.sg.state().String(), Type: "share"}, true
	}
	if g.st != nil {
		return Summary{Group: g.id, ProtocolType: "streams", State: g.st.state().String(), Type: "streams"}, true
	}
	return Summary{Group: g.id, ProtocolType: g.protocolType, State: g.state.String(), Type: "classic"}, true
}

// Describe answers one group of a DescribeGroups (v6 shape: a missing
// group is GROUP_ID_NOT_FOUND; the shell turns that into Kafka's older
// "Dead" answer for v0-v5). Members' metadata and assignments are only
// shown while Stable, as Kafka does.
func (g *Group) Describe(now time.Time, ref Ref) Effects {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	out := kmsg.NewDescribeGroupsResponseGroup()
	out.Group = g.id
	switch {
	case !g.live:
		out.State = Dead.String()
		out.ErrorCode = kerr.GroupIDNotFound.Code
		msg := "group " + g.id + " not found"
		out.ErrorMessage = &msg
	case g.cg != nil, g.sg != nil, g.st != nil:
		// Kafka answers DescribeGroups for a consumer or share group
		// with GROUP_ID_NOT_FOUND on v6 ("is not a classic group"); older
		// versions show it as Dead. ConsumerGroupDescribe and
		// ShareGroupDescribe describe them.
		out.State = Dead.String()
		out.ErrorCode = kerr.GroupIDNotFound.Code
		msg := "group " + g.id + " is not a classic group"
		out.ErrorMessage = &msg
	default:
		out.State = g.state.String()
		out.ProtocolType = g.protocolType
		if g.state == Stable {
			out.Protocol = g.protocol
		}
		for _, m := range g.order {
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID = m.id
			dm.InstanceID = m.instanceID
			dm.ClientID = m.clientID
			dm.ClientHost = m.clientHost
			dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
			if g.state == Stable {
				dm.ProtocolMetadata = m.metadataFor(g.protocol)
				if m.assignment != nil {
					dm.MemberAssignment = m.assignment
				}
			}
			out.Members = append(out.Members, dm)
		}
	}
	resp.Groups = []kmsg.DescribeGroupsResponseGroup{out}
	g.reply(ref, resp)
	return g.take()
}
