package group

// Offsets: OffsetCommit (members' and simple/admin commits), OffsetFetch,
// OffsetDelete, DeleteGroups and offset expiry. A commit's records are
// applied to the state only once persisted (Applied), so a failed write
// changes nothing.

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// validateCommit is Kafka's ClassicGroup.validateOffsetCommit (and the
// creation of a simple group for a commit without membership); for a
// consumer-protocol group it may also return a per-partition check.
func (g *Group) validateCommit(now time.Time, req *kmsg.OffsetCommitRequest) (*kerr.Error, commitCheck) {
	if g.cg != nil {
		// Members of the consumer protocol commit with v9+.
		return g.cg.validateCommit(req.MemberID, req.Generation, req.Version >= 9, kerr.StaleMemberEpoch)
	}
	if g.st != nil {
		return g.st.validateCommit(req.MemberID, req.Generation, req.Version >= 9, kerr.StaleMemberEpoch)
	}
	return g.validateClassicCommit(now, req), nil
}

func (g *Group) validateClassicCommit(now time.Time, req *kmsg.OffsetCommitRequest) *kerr.Error {
	if g.sg != nil {
		// Share groups commit nothing: their progress is the
		// share-partitions' state.
		return kerr.GroupIDNotFound
	}
	if !g.live {
		if req.Generation < 0 {
			// No group and no generation: an admin client or a consumer
			// assigning partitions itself (Flink). A simple group it is.
			g.create(now)
			return nil
		}
		if req.Version >= 9 {
			return kerr.GroupIDNotFound
		}
		return kerr.IllegalGeneration
	}
	if req.Generation < 0 && g.state == Empty {
		return nil
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil {
		if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
			return err
		}
		if req.Generation != g.generation {
			return kerr.IllegalGeneration
		}
	} else if g.state != Empty {
		// Without member id and generation, commits are only taken while
		// nobody else owns the partitions.
		return kerr.UnknownMemberID
	}
	if g.state == CompletingRebalance {
		// The member has its new generation but not yet its assignment.
		return kerr.RebalanceInProgress
	}
	return nil
}

// CommitOffsets handles an OffsetCommit whose topics have been checked to
// exist. The response's codes are final once the records are persisted.
func (g *Group) CommitOffsets(now time.Time, ref Ref, req *kmsg.OffsetCommitRequest) Effects {
	resp := kmsg.NewPtrOffsetCommitResponse()
	var groupErr *kerr.Error
	var check commitCheck
	if req.Group == "" {
		groupErr = kerr.InvalidGroupID
	} else {
		groupErr, check = g.validateCommit(now, req)
	}
	for _, rt := range req.Topics {
		ot := kmsg.NewOffsetCommitResponseTopic()
		ot.Topic, ot.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetCommitResponseTopicPartition()
			op.Partition = rp.Partition
			partErr := groupErr
			if partErr == nil && check != nil {
				partErr = check(rt.Topic, rt.TopicID, rp.Partition)
			}
			switch {
			case partErr != nil:
				op.ErrorCode = partErr.Code
			case rp.Metadata != nil && len(*rp.Metadata) > g.cfg.MaxMetadataBytes:
				op.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				o := Offset{Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, CommitTime: now}
				if rp.Metadata != nil {
					o.Metadata = *rp.Metadata
				}
				if req.Version == 1 && rp.Timestamp != -1 {
					o.CommitTime = time.UnixMilli(rp.Timestamp)
				}
				if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
					o.ExpireTime = now.Add(time.Duration(req.RetentionTimeMillis) * time.Millisecond)
				}
				g.record(Record{Kind: RecOffset, Group: g.id, Topic: rt.Topic, Partition: rp.Partition, Offset: o})
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	g.reply(ref, resp)
	g.advance(now)
	return g.take()
}

// FetchQuery is one group's part of an OffsetFetch.
type FetchQuery struct {
	// Topics nil means every committed offset.
	Topics []FetchTopic
	// MemberID / MemberEpoch (v9+, KIP-848): nil / -1 for admin reads.
	MemberID      *string
	MemberEpoch   int32
	RequireStable bool
}

// FetchTopic names partitions of one topic.
type FetchTopic struct {
	Topic      string
	Partitions []int32
}

// FetchOffsets answers one group's OffsetFetch part, in the v8+ shape.
func (g *Group) FetchOffsets(now time.Time, ref Ref, q FetchQuery) Effects {
	resp := kmsg.NewPtrOffsetFetchResponse()
	out := kmsg.NewOffsetFetchResponseGroup()
	out.Group = g.id
	if code := g.validateFetch(q); code != 0 {
		out.ErrorCode = code
	} else {
		out.Topics = g.committed(q)
	}
	resp.Groups = []kmsg.OffsetFetchResponseGroup{out}
	g.reply(ref, resp)
	return g.take()
}

func (g *Group) validateFetch(q FetchQuery) int16 {
	if g.cg != nil {
		return g.cg.validateFetch(q)
	}
	if g.st != nil {
		return g.st.validateFetch(q)
	}
	if g.sg != nil {
		return kerr.GroupIDNotFound.Code
	}
	if !g.live && (q.MemberID != nil || q.MemberEpoch >= 0) {
		return kerr.GroupIDNotFound.Code
	}
	return 0
}

func fetchPartition(p int32, o Offset, ok bool) kmsg.OffsetFetchResponseGroupTopicPartition {
	fp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
	fp.Partition = p
	fp.Offset, fp.LeaderEpoch = -1, -1
	md := ""
	if ok {
		fp.Offset, fp.LeaderEpoch, md = o.Offset, o.LeaderEpoch, o.Metadata
	}
	fp.Metadata = &md
	return fp
}

func (g *Group) committed(q FetchQuery) []kmsg.OffsetFetchResponseGroupTopic {
	var out []kmsg.OffsetFetchResponseGroupTopic
	if q.Topics == nil {
		byTopic := map[string][]int32{}
		for k := range g.offsets.Keys() {
			byTopic[k.topic] = append(byTopic[k.topic], k.partition)
		}
		names := make([]string, 0, len(byTopic))
		for t := range byTopic {
			names = append(names, t)
		}
		sort.Strings(names)
		for _, t := range names {
			ps := byTopic[t]
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			q.Topics = append(q.Topics, FetchTopic{Topic: t, Partitions: ps})
		}
	}
	for _, ft := range q.Topics {
		ot := kmsg.NewOffsetFetchResponseGroupTopic()
		ot.Topic = ft.Topic
		for _, p := range ft.Partitions {
			o, ok := g.offsets.Get(tp{ft.Topic, p})
			fp := fetchPartition(p, o, ok)
			if q.RequireStable && g.unstable(ft.Topic, p) {
				fp.Offset, fp.LeaderEpoch = -1, -1
				fp.ErrorCode = kerr.UnstableOffsetCommit.Code
			}
			ot.Partitions = append(ot.Partitions, fp)
		}
		out = append(out, ot)
	}
	return out
}

// DeleteOffsets handles an OffsetDelete whose topics have been checked to
// exist.
func (g *Group) DeleteOffsets(now time.Time, ref Ref, req *kmsg.OffsetDeleteRequest) Effects {
	resp := kmsg.NewPtrOffsetDeleteResponse()
	switch {
	case !g.live, g.sg != nil:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
	case g.cg == nil && g.st == nil && g.state != Empty && g.protocolType != "consumer":
		// Only consumer-protocol groups say what they subscribe to.
		resp.ErrorCode = kerr.NonEmptyGroup.Code
	default:
		for _, rt := range req.Topics {
			ot := kmsg.NewOffsetDeleteResponseTopic()
			ot.Topic = rt.Topic
			subscribed := g.isSubscribed(rt.Topic)
			for _, rp := range rt.Partitions {
				op := kmsg.NewOffsetDeleteResponseTopicPartition()
				op.Partition = rp.Partition
				if subscribed {
					op.ErrorCode = kerr.GroupSubscribedToTopic.Code
				} else if g.offsets.Has(tp{rt.Topic, rp.Partition}) {
					g.record(Record{Kind: RecOffsetTombstone, Group: g.id, Topic: rt.Topic, Partition: rp.Partition})
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			resp.Topics = append(resp.Topics, ot)
		}
	}
	g.reply(ref, resp)
	return g.take()
}

// Delete handles one group of a DeleteGroups: only an empty group goes,
// with its offsets.
func (g *Group) Delete(now time.Time, ref Ref) Effects {
	resp := kmsg.NewPtrDeleteGroupsResponse()
	out := kmsg.NewDeleteGroupsResponseGroup()
	out.Group = g.id
	switch {
	case g.id == "":
		out.ErrorCode = kerr.InvalidGroupID.Code
	case !g.live:
		out.ErrorCode = kerr.GroupIDNotFound.Code
	case !g.isEmpty() || len(g.pendingTxn) > 0:
		// A transaction's staged offsets count as activity.
		out.ErrorCode = kerr.NonEmptyGroup.Code
	default:
		g.recordDeletion()
		// The share-partitions' state goes with the group (the shell
		// tells the listener once the deletion is persisted).
		g.eff.ShareGroupDeleted = g.sg != nil
	}
	resp.Groups = []kmsg.DeleteGroupsResponseGroup{out}
	g.reply(ref, resp)
	return g.take()
}

func (g *Group) isEmpty() bool {
	if g.cg != nil {
		return len(g.cg.members) == 0
	}
	if g.st != nil {
		return len(g.st.members) == 0
	}
	if g.sg != nil {
		return len(g.sg.members) == 0
	}
	return g.state == Empty
}

// recordDeletion records tombstones for every offset and the group.
func (g *Group) recordDeletion() {
	keys := make([]tp, 0, g.offsets.Len())
	for k := range g.offsets.Keys() {
		keys = append(keys, k)
	}
	g.recordOffsetTombstones(keys)
	g.record(Record{Kind: RecGroupTombstone, Group: g.id})
}

// recordOffsetTombstones records a tombstone for each of keys, in topic
// and partition order (keys is sorted in place).
func (g *Group) recordOffsetTombstones(keys []tp) {
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].partition < keys[j].partition
	})
	for _, k := range keys {
		g.record(Record{Kind: RecOffsetTombstone, Group: g.id, Topic: k.topic, Partition: k.partition})
	}
}

// ExpireOffsets drops offsets past offsets.retention.minutes (KIP-211):
// all of an empty group's offsets once it has been empty that long, a
// simple group's by commit time, and a consumer group's offsets for topics
// it no longer subscribes to. An empty group left without offsets is
// deleted, as Kafka's cleanup does.
func (g *Group) ExpireOffsets(now time.Time) Effects {
	drop, all := g.expiredOffsets(now)
	if all {
		g.recordDeletion()
		return g.take()
	}
	g.recordOffsetTombstones(drop)
	return g.take()
}

// expiredOffsets is what ExpireOffsets at now drops: these offsets, or
// (all) the whole group, an empty one left with nothing unexpired.
func (g *Group) expiredOffsets(now time.Time) (drop []tp, all bool) {
	if !g.live || len(g.pendingTxn) > 0 || g.sg != nil {
		// A share group has no offsets and is not expired: it goes
		// only through DeleteGroups, which drops its share-partitions.
		return nil, false
	}
	retention := g.cfg.OffsetsRetention
	expired := func(o Offset, base time.Time) bool {
		if !o.ExpireTime.IsZero() {
			return !now.Before(o.ExpireTime)
		}
		return now.Sub(base) >= retention
	}
	empty := g.isEmpty()
	for k, o := range g.offsets.All() {
		switch {
		case empty && g.protocolType != "" && g.cg == nil && g.st == nil:
			if expired(o, g.stateSince) {
				drop = append(drop, k)
			}
		case empty:
			if expired(o, o.CommitTime) {
				drop = append(drop, k)
			}
		case g.cg != nil || g.st != nil || (g.protocolType == "consumer" && g.subscribedKnown):
			if !g.isSubscribed(k.topic) && expired(o, o.CommitTime) {
				drop = append(drop, k)
			}
		}
	}
	if empty && len(g.pending) == 0 && len(drop) == g.offsets.Len() {
		return nil, true
	}
	return drop, false
}

// Applied takes records back once persisted: offsets and deletions take
// effect. (Group metadata records are already reflected in the state.)
func (g *Group) Applied(recs []Record) {
	for _, r := range recs {
		switch r.Kind {
		case RecOffset:
			g.live = true
			g.offsets.Set(tp{r.Topic, r.Partition}, r.Offset)
		case RecOffsetTombstone:
			g.offsets.Delete(tp{r.Topic, r.Partition})
		case RecGroupTombstone:
			g.reset()
		case RecTxnOffset, RecTxnOffsetTombstone:
			g.applyTxn(r)
		}
	}
}

// Restore rebuilds a group from its persisted records (in log order, as
// the store's snapshot hands them back).
func (g *Group) Restore(recs []Record, now time.Time) {
	// A group that was classic and became a consumer group keeps its old
	// (empty) classic metadata beside the consumer-protocol state: the
	// latter wins, so it is applied last.
	var cg, sg, st *Record
	// cgMembers are the consumer group's member records (version 3), by
	// member id, in the order the store hands them back.
	var cgMembers map[string]*cgSnapshot
	// The streams group's topology and member records.
	var stTopology *stSnapshot
	var stMembers map[string]*stSnapshot
	defer func() {
		if st != nil && g.live {
			var members []*stSnapshot
			for _, id := range sortedKeys(stMembers) {
				members = append(members, stMembers[id])
			}
			g.restoreStreamsGroup(st.ST, stTopology, members, now)
		}
		if cg != nil && g.live {
			members := make([]*cgSnapshot, 0, len(cgMembers))
			for _, id := range sortedKeys(cgMembers) {
				members = append(members, cgMembers[id])
			}
			g.restoreConsumerGroup(cg.CG, members, now)
		}
		if sg != nil && g.live {
			g.restoreShareGroup(sg.SG, now)
		}
	}()
	for i, r := range recs {
		switch r.Kind {
		case RecGroup:
			g.restoreMeta(r.Meta, now)
		case RecConsumerGroupMember:
			if r.CGM == nil {
				delete(cgMembers, r.Member)
				continue
			}
			if cgMembers == nil {
				cgMembers = map[string]*cgSnapshot{}
			}
			cgMembers[r.Member] = r.CGM
		case RecConsumerGroup:
			if r.CG == nil {
				cg = nil
				clear(cgMembers)
				continue
			}
			cg = &recs[i]
			g.live = true
		case RecShareGroup:
			if r.SG == nil {
				sg = nil
				continue
			}
			sg = &recs[i]
			g.live = true
		case RecStreamsTopology:
			stTopology = r.ST
		case RecStreamsMember:
			if r.ST == nil {
				delete(stMembers, r.Member)
				continue
			}
			if stMembers == nil {
				stMembers = map[string]*stSnapshot{}
			}
			stMembers[r.Member] = r.ST
		case RecStreamsGroup:
			if r.ST == nil {
				st, stTopology = nil, nil
				clear(stMembers)
				continue
			}
			st = &recs[i]
			g.live = true
		case RecOffset:
			if !g.live {
				// Offsets without metadata: a simple group.
				g.live = true
				g.state = Empty
				g.stateSince = r.Offset.CommitTime
			}
			g.offsets.Set(tp{r.Topic, r.Partition}, r.Offset)
		case RecOffsetTombstone:
			g.offsets.Delete(tp{r.Topic, r.Partition})
		case RecGroupTombstone:
			g.reset()
			cg, sg, st = nil, nil, nil
			clear(cgMembers)
			stTopology = nil
			clear(stMembers)
		case RecTxnOffset, RecTxnOffsetTombstone:
			if r.Kind == RecTxnOffset && !g.live {
				g.live, g.state, g.stateSince = true, Empty, r.Offset.CommitTime
			}
			g.applyTxn(r)
		}
	}
}

// Committed returns the committed offset of a partition (for tests and
// admin tools).
func (g *Group) Committed(topic string, partition int32) (Offset, bool) {
	return g.offsets.Get(tp{topic, partition})
}

// DropTopics deletes the committed (and staged) offsets of deleted
// topics, as Kafka does when a topic goes, so that a topic created again
// under the same name starts without them.
func (g *Group) DropTopics(now time.Time, names map[string]bool) Effects {
	var keys []tp
	for k := range g.offsets.Keys() {
		if names[k.topic] {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].partition < keys[j].partition
	})
	for _, k := range keys {
		g.record(Record{Kind: RecOffsetTombstone, Group: g.id, Topic: k.topic, Partition: k.partition})
	}
	for pid, staged := range g.pendingTxn {
		for k := range staged {
			if names[k.topic] {
				g.record(Record{Kind: RecTxnOffsetTombstone, Group: g.id, Topic: k.topic, Partition: k.partition, ProducerID: pid})
			}
		}
	}
	return g.take()
}
