package protocol

// ListGroups: versions 0-5 (state filter from v4, type filter from v5:
// "classic", "consumer", "share" or "streams"; both filters match
// case-insensitively, as Kafka's do). Share groups show protocol type
// "share", streams groups "streams". A node lists the groups it
// coordinates (every shard it leads, coordinators.go), as a Kafka broker
// lists its own; admin clients ask every node.

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/group"
)

func init() { register(16, 0, 5, (*Server).listGroups) }

func (s *Server) listGroups(r *Request) {
	req := r.Msg.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	matches := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	// Kafka lists every group to DESCRIBE on the cluster, else the groups
	// the principal may describe.
	all := s.authz == nil || s.authorizedQuiet(r, acls.Describe, acls.Cluster, acls.ClusterName)
	var listed []group.Summary
	for _, m := range s.allGroups() {
		listed = append(listed, m.ListGroups()...)
	}
	slices.SortFunc(listed, func(a, b group.Summary) int { return strings.Compare(a.Group, b.Group) })
	for _, g := range listed {
		if !matches(req.StatesFilter, g.State) || !matches(req.TypesFilter, g.Type) {
			continue
		}
		if !all && !s.authorizedQuiet(r, acls.Describe, acls.Group, g.Group) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.Group, g.ProtocolType, g.State, g.Type
		resp.Groups = append(resp.Groups, lg)
	}
	r.Respond(resp)
}
