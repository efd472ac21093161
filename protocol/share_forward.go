package protocol

// Share requests in a cluster with partition raft groups. A share
// consumer sends ShareFetch and ShareAcknowledge to each partition's
// leader, as Metadata names it; with partition groups those leaders are
// every node, while the share-partition state (what is acquired by whom,
// delivery counts) and the share group coordinator stay with the
// metadata group's leader. A node that does not lead the metadata group
// forwards them there, naming itself as their origin; the leader keeps
// one session per member and origin (the client keeps one per broker),
// reads the partitions from its own replica (every node holds every
// partition; a follower's replica holds what is committed), and the
// answer goes back through the node the client asked. Without partition
// groups every partition is led by the metadata group's leader, and a
// node that does not lead answers NOT_LEADER_OR_FOLLOWER as before.

// shareForwardKeys are the share requests forwarded so.
var shareForwardKeys = map[int16]bool{
	78: true, // ShareFetch
	79: true, // ShareAcknowledge
}

// forwardShare forwards a share request to the metadata group's leader
// when the cluster runs partition groups and this node does not lead it,
// and reports whether it did (the answer then comes from there).
func (s *Server) forwardShare(r *Request) bool {
	if !s.cfg.PartitionGroups || s.forwarder == nil || r.local || s.cluster.Serving() {
		return false
	}
	go s.runForward(r)
	return true
}
