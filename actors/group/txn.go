package group

// Transactional offset commits (KIP-98, KIP-447): TxnOffsetCommit stages
// offsets under the producer id; they become committed offsets only when
// the transaction coordinator completes the transaction with a commit,
// and vanish on an abort. Staged offsets are persisted, so a restart keeps
// them pending until the coordinator completes the transaction again.
// While a partition has staged offsets, an OffsetFetch that requires
// stable offsets gets UNSTABLE_OFFSET_COMMIT for it.

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// validateTxnCommit is validateOffsetCommit for transactional commits:
// without member information they are taken in any state. From v6
// (KIP-1319) a missing group and a consumer-protocol member's old epoch
// are told apart (GROUP_ID_NOT_FOUND, STALE_MEMBER_EPOCH); older versions
// get ILLEGAL_GENERATION for both, as Kafka answers them.
func (g *Group) validateTxnCommit(now time.Time, req *kmsg.TxnOffsetCommitRequest) (*kerr.Error, commitCheck) {
	if g.live && g.sg == nil && g.cg != nil && !(req.Generation < 0 && req.MemberID == "" && req.InstanceID == nil) {
		stale := kerr.IllegalGeneration
		if req.Version >= 6 {
			stale = kerr.StaleMemberEpoch
		}
		return g.cg.validateCommit(req.MemberID, req.Generation, true, stale)
	}
	if g.live && g.st != nil && !(req.Generation < 0 && req.MemberID == "" && req.InstanceID == nil) {
		stale := kerr.IllegalGeneration
		if req.Version >= 6 {
			stale = kerr.StaleMemberEpoch
		}
		return g.st.validateCommit(req.MemberID, req.Generation, true, stale)
	}
	return g.validateClassicTxnCommit(now, req), nil
}

func (g *Group) validateClassicTxnCommit(now time.Time, req *kmsg.TxnOffsetCommitRequest) *kerr.Error {
	anonymous := req.Generation < 0 && req.MemberID == "" && req.InstanceID == nil
	if !g.live {
		if !anonymous && req.Generation >= 0 {
			if req.Version >= 6 {
				return kerr.GroupIDNotFound
			}
			return kerr.IllegalGeneration
		}
		g.create(now)
		return nil
	}
	if g.sg != nil {
		// A share group commits no offsets.
		return kerr.GroupIDNotFound
	}
	if anonymous {
		return nil
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration
	}
	return nil
}

// TxnCommitOffsets stages a TxnOffsetCommit's offsets (topics checked to
// exist by the caller).
func (g *Group) TxnCommitOffsets(now time.Time, ref Ref, req *kmsg.TxnOffsetCommitRequest) Effects {
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	groupErr := kerr.InvalidGroupID
	var check commitCheck
	if req.Group != "" {
		groupErr, check = g.validateTxnCommit(now, req)
	}
	for _, rt := range req.Topics {
		ot := kmsg.NewTxnOffsetCommitResponseTopic()
		ot.Topic, ot.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			op := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			op.Partition = rp.Partition
			partErr := groupErr
			if partErr == nil && check != nil {
				partErr = check(rt.Topic, [16]byte{}, rp.Partition)
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
				g.record(Record{Kind: RecTxnOffset, Group: g.id, Topic: rt.Topic, Partition: rp.Partition, ProducerID: req.ProducerID, Offset: o})
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	g.reply(ref, resp)
	return g.take()
}

// CompleteTxn commits or aborts what producerID staged. The answer is an
// EndTxnResponse carrying only an error code (the request has no Kafka
// response of its own: Kafka's coordinator learns this from a marker).
func (g *Group) CompleteTxn(now time.Time, ref Ref, producerID int64, commit bool) Effects {
	staged := g.pendingTxn[producerID]
	keys := make([]tp, 0, len(staged))
	for k := range staged {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].partition < keys[j].partition
	})
	// Committed offsets first, then the staged ones' tombstones: a crash
	// between them leaves the staged offsets pending, and completing the
	// transaction again (as the coordinator does on recovery) is harmless.
	if commit {
		for _, k := range keys {
			o := staged[k]
			o.CommitTime = now
			g.record(Record{Kind: RecOffset, Group: g.id, Topic: k.topic, Partition: k.partition, Offset: o})
		}
	}
	for _, k := range keys {
		g.record(Record{Kind: RecTxnOffsetTombstone, Group: g.id, Topic: k.topic, Partition: k.partition, ProducerID: producerID})
	}
	g.reply(ref, kmsg.NewPtrEndTxnResponse())
	return g.take()
}

// unstable reports whether a transaction has staged an offset for the
// partition.
func (g *Group) unstable(topic string, partition int32) bool {
	for _, staged := range g.pendingTxn {
		if _, ok := staged[tp{topic, partition}]; ok {
			return true
		}
	}
	return false
}

func (g *Group) applyTxn(r Record) {
	switch r.Kind {
	case RecTxnOffset:
		g.live = true
		if g.pendingTxn == nil {
			g.pendingTxn = map[int64]map[tp]Offset{}
		}
		if g.pendingTxn[r.ProducerID] == nil {
			g.pendingTxn[r.ProducerID] = map[tp]Offset{}
		}
		g.pendingTxn[r.ProducerID][tp{r.Topic, r.Partition}] = r.Offset
	case RecTxnOffsetTombstone:
		delete(g.pendingTxn[r.ProducerID], tp{r.Topic, r.Partition})
		if len(g.pendingTxn[r.ProducerID]) == 0 {
			delete(g.pendingTxn, r.ProducerID)
		}
	}
}
