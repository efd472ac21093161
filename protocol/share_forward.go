package protocol

// Share requests in a cluster with partition raft groups. A share
// consumer sends ShareFetch and ShareAcknowledge to each partition's
// leader, as Metadata names it; with partition groups those leaders are
// every node, while the share-partition state (what is acquired by whom,
// delivery counts) is kept with the group's coordinator: the leader of
// the raft group the group id is placed on (coordinators.go; the
// metadata group's leader when the cluster does not spread them). A node
// that is not the coordinator forwards them there, naming itself as
// their origin; the coordinator keeps one session per member and origin
// (the client keeps one per broker), reads the partitions from its own
// replica (every node holds every partition; a follower's replica holds
// what is committed), and the answer goes back through the node the
// client asked. Without partition groups every partition is led by the
// metadata group's leader, and a node that does not lead answers
// NOT_LEADER_OR_FOLLOWER as before.

import "github.com/twmb/franz-go/pkg/kmsg"

// shareForwardKeys are the share requests forwarded so.
var shareForwardKeys = map[int16]bool{
	78: true, // ShareFetch
	79: true, // ShareAcknowledge
}

// forwardShare forwards a share request to its group's coordinator when
// the cluster runs partition groups and this node is not it, and reports
// whether it did (the answer then comes from there).
func (s *Server) forwardShare(r *Request) bool {
	if !s.cfg.PartitionGroups || s.forwarder == nil || r.local || s.forwardTarget(r).Serving() {
		return false
	}
	go s.runForward(r)
	return true
}

// forwardTarget is the raft group whose leader serves r for other nodes:
// a share request's group coordinator, else the metadata group.
func (s *Server) forwardTarget(r *Request) GroupView {
	switch m := r.Msg.(type) {
	case *kmsg.ShareFetchRequest:
		if m.GroupID != nil {
			return s.coordinatorView(*m.GroupID)
		}
	case *kmsg.ShareAcknowledgeRequest:
		if m.GroupID != nil {
			return s.coordinatorView(*m.GroupID)
		}
	}
	return s.cluster.Group(0)
}
