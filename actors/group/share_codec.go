package group

// The persisted form of a share group's state: one snapshot value per
// change (the store keeps the last), under its own key version
// (sgKeyVersion). Version 1:
//
//	version u8 | epoch i32 | assignmentEpoch i32
//	topics: n u32, { name str | id [16] | partitions i32 }
//	members: n u32, { id str | rack nstr | clientID str | clientHost str |
//	  subscribed: n u32 {str} | epoch i32 | prevEpoch i32 | assigned asg |
//	  target asg }
//
// with str, nstr and asg as in cgcodec.go. Kafka persists the same facts
// (ShareGroupMetadata, ShareGroupMemberMetadata, the target and current
// member assignments) as separate records.

const sgCodecVersion = 1

// sgSnapshot holds an encoded share group (encoded when the record is
// made, so later changes to the group cannot race with the write).
type sgSnapshot struct{ raw []byte }

func (s *sgSnapshot) appendTo(dst []byte) []byte { return append(dst, s.raw...) }

func readSGSnapshot(b []byte) (*sgSnapshot, error) {
	if _, err := decodeShareGroup(b); err != nil {
		return nil, err
	}
	return &sgSnapshot{raw: append([]byte(nil), b...)}, nil
}

func (s *shareGroup) encode() []byte {
	w := &cgWriter{}
	w.head(sgCodecVersion, s.epoch, s.assignmentEpoch, s.topics)
	ids := s.sortedMembers()
	w.u32(uint32(len(ids)))
	for _, id := range ids {
		m := s.members[id]
		w.str(m.id)
		w.nstr(m.rackID)
		w.str(m.clientID)
		w.str(m.clientHost)
		w.strs(m.subscribed)
		w.i32(m.epoch)
		w.i32(m.prevEpoch)
		w.asg(m.assigned)
		w.asg(s.target[id])
	}
	return w.b
}

func decodeShareGroup(b []byte) (*shareGroup, error) {
	s := newShareGroup()
	r, err := readHead(b, sgCodecVersion, "share", &s.epoch, &s.assignmentEpoch, s.topics)
	if err != nil {
		return nil, err
	}
	nm := r.count()
	for i := 0; i < nm && r.err == nil; i++ {
		m := &shareMember{}
		m.id = r.str()
		m.rackID = r.nstr()
		m.clientID = r.str()
		m.clientHost = r.str()
		m.subscribed = r.strs()
		m.epoch = r.i32()
		m.prevEpoch = r.i32()
		m.assigned = r.asg()
		if t := r.asg(); t != nil {
			s.target[m.id] = t
		}
		s.members[m.id] = m
	}
	if err := r.done("share"); err != nil {
		return nil, err
	}
	return s, nil
}
