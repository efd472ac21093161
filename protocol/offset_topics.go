package protocol

// Offsets for internal topics. Kafka takes OffsetCommit, TxnOffsetCommit,
// OffsetFetch and OffsetDelete for any topic its metadata holds, internal
// ones included: a consumer with exclude.internal.topics=false may be
// assigned __consumer_offsets or __transaction_state and commit there.
// Regent shows both topics (internal_topics.go) but serves no records from
// them; a commit for their partitions is still stored and fetched as
// Kafka's are, by name, with the ids Metadata gives them.

// offsetTopic is a topic offsets may be kept for: a registry topic or an
// internal one.
type offsetTopic struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// hasPartition reports whether p is one of the topic's partitions.
func (t offsetTopic) hasPartition(p int32) bool { return p >= 0 && p < t.Partitions }

// offsetTopicByName returns the topic named name, ok false if there is
// none.
func (s *Server) offsetTopicByName(name string) (offsetTopic, bool) {
	if t := s.topics.Get(name); t != nil {
		return offsetTopic{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))}, true
	}
	if it, ok := s.internalTopic(name); ok {
		return offsetTopic{Name: it.Name, ID: it.ID, Partitions: it.Partitions}, true
	}
	return offsetTopic{}, false
}

// offsetTopicByID returns the topic with that id, ok false if there is
// none.
func (s *Server) offsetTopicByID(id [16]byte) (offsetTopic, bool) {
	if t := s.topics.GetByID(id); t != nil {
		return offsetTopic{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))}, true
	}
	for _, name := range []string{offsetsTopic, txnStateTopic} {
		if it, ok := s.internalTopic(name); ok && it.ID == id {
			return offsetTopic{Name: it.Name, ID: it.ID, Partitions: it.Partitions}, true
		}
	}
	return offsetTopic{}, false
}

// commitTopic resolves a commit's topic: by id from byIDFrom on (OffsetCommit
// v10, TxnOffsetCommit v6), by name before. ok is false when there is no
// such topic; unknownID is true when it was named by an id.
func (s *Server) commitTopic(version, byIDFrom int16, name string, id [16]byte) (t offsetTopic, ok, unknownID bool) {
	if version < byIDFrom {
		t, ok = s.offsetTopicByName(name)
		return t, ok, false
	}
	t, ok = s.offsetTopicByID(id)
	return t, ok, !ok
}
