package protocol

// ShareFetch: versions 1-2, as Kafka 4.3 serves them (v0 was Kafka 4.0's
// early-access form, gone since 4.1; v2 adds ShareAcquireMode, KIP-1206,
// and RENEW acknowledgements, KIP-1222). A share group member's fetch:
// acknowledgements piggybacked on it are applied first (the partition's
// AcknowledgeErrorCode), then records are acquired for the member from the
// session's partitions (share_sessions.go) and locked for the group's
// share.record.lock.duration.ms (AcquisitionLockTimeoutMs). With nothing
// acquired and MaxWaitMs > 0 the fetch waits for appends to its
// partitions and for records of its group that became available
// otherwise (locks expired, acknowledged RELEASE, given back by a member
// that left, closed its session or its connection: the share manager
// tells), until MinBytes are acquired or the wait ends. A fetch with IsRenewAck only acknowledges (RENEW keeps the locks)
// and must ask for no records (INVALID_REQUEST otherwise), as Kafka's.
// Epoch -1 applies the acknowledgements and closes the session.
// MaxBytes, MaxRecords (500 when unset) and the connection's response
// budget bound what is acquired; the first batch goes out whatever its
// size, as Fetch, except that MaxBytes 0 (or less) acquires nothing, as
// Kafka's (its fetch size is the least of MaxBytes and its limits). Responses count against the client's
// consumer_byte_rate quota and are throttled as fetches are.
// ACLs: READ on the group (else GROUP_AUTHORIZATION_FAILED, nothing done),
// READ on each topic (else its partitions answer
// TOPIC_AUTHORIZATION_FAILED).
// In a cluster only the serving leader serves: elsewhere partitions answer
// NOT_LEADER_OR_FOLLOWER with the leader in CurrentLeader and
// NodeEndpoints, as Kafka points a client at the partition's leader.

import (
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/actors/quotas"
	"github.com/regent-broker/regent/actors/share"
)

func init() { register(78, 1, 2, (*Server).shareFetch) }

const (
	// shareDefaultMaxRecords is what a fetch without MaxRecords acquires
	// at most (the Java client's max.poll.records default).
	shareDefaultMaxRecords = 500
	// shareDefaultLockMs is the lock duration answered when no
	// share-partition told one (Kafka's default).
	shareDefaultLockMs = 30000
)

// shareItem is one partition of a ShareFetch or ShareAcknowledge.
type shareItem struct {
	part sharePart
	// acks are the request's acknowledgements of the partition (nil:
	// none); ackErr is set once they are applied.
	acks    []share.AckBatch
	hasAcks bool
	ackErr  int16
	// err refuses the partition (unknown topic, denied, not leader).
	err int16
	// fetch says the partition is fetched from (in the session).
	fetch bool
	// what was acquired, over every pass.
	records  []byte
	acquired []share.AcquiredRange
}

func (s *Server) shareFetch(r *Request) {
	if s.forwardShare(r) {
		return
	}
	req := r.Msg.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	group, member := deref(req.GroupID), deref(req.MemberID)
	code, msg := s.shareMemberCheck(r, group, member)
	switch {
	case code != 0:
		resp.ErrorCode, resp.ErrorMessage = code, msg
	case req.IsRenewAck && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0):
		// As Kafka: a renewing fetch asks for no records.
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = kmsg.StringPtr("a ShareFetch with IsRenewAck must have MaxBytes, MinBytes, MaxRecords and MaxWaitMs 0")
	}
	if resp.ErrorCode != 0 {
		r.Respond(resp)
		return
	}
	go func() {
		r.clock.begin(&r.clock.work)
		defer func() {
			if p := recover(); p != nil {
				s.log.ErrorContext(r.Context(), "share fetch panicked", "panic", p)
				r.Respond(errorResponse(r, p))
			}
		}()
		var out *Budget
		if r.Conn != nil {
			out = r.Conn.Output
		}
		resp, held := s.doShareFetch(r, req, group, member, out)
		if s.quotaLimits(quotas.ConsumerByteRate) {
			// As Kafka: share fetches count against consumer_byte_rate.
			resp.ThrottleMillis = s.recordQuota(r, quotas.ConsumerByteRate, float64(shareFetchSize(resp)))
		}
		r.clock.end(&r.clock.work)
		r.RespondSized(resp, shareFetchSize(resp))
		s.releaseFetch(out, held)
	}()
}

// doShareFetch serves one ShareFetch off the event loop. It returns the
// response and the bytes it holds of the fetch and output budgets, for
// the caller to release once the response is handed over.
func (s *Server) doShareFetch(r *Request, req *kmsg.ShareFetchRequest, group, member string, out *Budget) (*kmsg.ShareFetchResponse, int) {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	resp.AcquisitionLockTimeoutMillis = s.shareLockMs(group)
	st := s.share
	key := shareKey(r, group, member)

	// The request's partitions, with their acknowledgements.
	var items []*shareItem
	index := map[sharePart]*shareItem{}
	itemOf := func(p sharePart) *shareItem {
		if it, ok := index[p]; ok {
			return it
		}
		it := &shareItem{part: p}
		index[p] = it
		items = append(items, it)
		return it
	}
	var reqParts []sharePart
	anyAcks := false
	for _, rt := range req.Topics {
		name := s.shareTopicName(rt.TopicID)
		for _, rp := range rt.Partitions {
			p := sharePart{topicID: rt.TopicID, topic: name, partition: rp.Partition}
			reqParts = append(reqParts, p)
			if len(rp.AcknowledgementBatches) == 0 {
				continue
			}
			anyAcks = true
			it := itemOf(p)
			it.hasAcks = true
			acks, err := shareAcks(len(rp.AcknowledgementBatches), func(i int) (int64, int64, []int8) {
				b := rp.AcknowledgementBatches[i]
				return b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
			}, req.IsRenewAck)
			if err != nil {
				it.ackErr = kerr.InvalidRequest.Code
				continue
			}
			it.acks = acks
		}
	}
	var forget []sharePart
	for _, ft := range req.ForgottenTopicsData {
		for _, p := range ft.Partitions {
			forget = append(forget, sharePart{topicID: ft.TopicID, partition: p})
		}
	}

	if !s.shareServing(group) {
		// Sessions live where the data is served: a node that does not
		// serve keeps none (nothing would ever close them), and points
		// the client at the leader for every partition.
		for _, p := range reqParts {
			itemOf(p)
		}
		s.shareCheckItems(r, group, items)
		s.shareFetchAssemble(resp, items, true)
		return resp, 0
	}

	// The session decides what is fetched.
	var fetchParts []sharePart
	closing := false
	switch req.ShareSessionEpoch {
	case 0:
		if anyAcks {
			// Kafka: a new session carries no acknowledgements.
			resp.ErrorCode = kerr.InvalidRequest.Code
			resp.ErrorMessage = kmsg.StringPtr("a ShareFetch opening a share session (epoch 0) must not acknowledge")
			return resp, 0
		}
		var conn uint64
		if r.Conn != nil {
			conn = r.Conn.ID
		}
		released, err := st.sessions.open(key, reqParts, conn)
		s.releaseParts(group, member, released)
		if err != nil {
			resp.ErrorCode = err.Code
			return resp, 0
		}
		fetchParts = reqParts
	case -1:
		if err := st.sessions.check(key, -1); err != nil {
			resp.ErrorCode = err.Code
			return resp, 0
		}
		closing = true
	default:
		parts, forgotten, err := st.sessions.next(key, req.ShareSessionEpoch, reqParts, forget)
		if err != nil {
			resp.ErrorCode = err.Code
			return resp, 0
		}
		s.releaseParts(group, member, forgotten)
		fetchParts = parts
	}
	if !closing && !req.IsRenewAck {
		for _, p := range fetchParts {
			itemOf(p).fetch = true
		}
	}

	s.shareCheckItems(r, group, items)
	s.shareApplyAcks(group, member, items)
	if closing {
		if parts, err := st.sessions.close(key); err == nil {
			s.releaseParts(group, member, parts)
		}
	}

	held := 0
	if !closing && !req.IsRenewAck {
		held = s.shareAcquireLoop(r, req, group, member, items, out)
	}
	s.shareFetchAssemble(resp, items, req.ShareSessionEpoch == 0)
	return resp, held
}

// shareTopicName is the topic an id names ("" when none).
func (s *Server) shareTopicName(id [16]byte) string {
	if t := s.topics.GetByID(id); t != nil {
		return t.Name
	}
	return ""
}

// shareServing reports whether this node serves group's share requests:
// it coordinates the group (the metadata group's leader when the cluster
// does not spread coordinators, coordinators.go).
func (s *Server) shareServing(group string) bool { return s.coordinatorView(group).Serving() }

// shareCheckItems sets the errors of partitions that cannot be served:
// unknown topic ids, topics the principal may not READ, partitions that do
// not exist, and every partition on a node that does not serve.
func (s *Server) shareCheckItems(r *Request, group string, items []*shareItem) {
	serving := s.shareServing(group)
	readable := map[string]bool{}
	for _, it := range items {
		switch {
		case it.part.topic == "":
			it.err = kerr.UnknownTopicID.Code
		case !s.shareReadable(r, readable, it.part.topic):
			it.err = kerr.TopicAuthorizationFailed.Code
		case s.topics.Partition(it.part.topic, it.part.partition) == nil:
			it.err = kerr.UnknownTopicOrPartition.Code
		case !serving:
			it.err = kerr.NotLeaderForPartition.Code
		}
		if it.err != 0 && it.hasAcks && it.ackErr == 0 {
			it.ackErr = it.err
		}
	}
}

// shareReadable decides READ on a topic once per request.
func (s *Server) shareReadable(r *Request, seen map[string]bool, topic string) bool {
	ok, done := seen[topic]
	if !done {
		ok = s.authorized(r, acls.Read, acls.Topic, topic)
		seen[topic] = ok
	}
	return ok
}

// shareApplyAcks applies the items' acknowledgements, every partition at
// once, and waits for them all: acknowledgements go before acquisition so
// that released records can be acquired again by the same fetch.
func (s *Server) shareApplyAcks(group, member string, items []*shareItem) {
	core := s.share.core
	var pending []*shareItem
	for _, it := range items {
		if it.hasAcks && it.ackErr == 0 && it.err == 0 {
			pending = append(pending, it)
		}
	}
	if len(pending) == 0 {
		return
	}
	done := make(chan struct{})
	part := fanIn(len(pending), func() { close(done) })
	if releases(pending) {
		defer s.shareReleased(group)
	}
	if b, ok := core.(shareBatcher); ok {
		// Written together: one state write for the fetch's acks.
		reqs := make([]share.AckRequest, len(pending))
		for i, it := range pending {
			reqs[i] = share.AckRequest{Key: share.Key{Group: group, Topic: it.part.topic, TopicID: it.part.topicID, Partition: it.part.partition}, Acks: it.acks}
		}
		b.AcknowledgeAll(member, reqs, func(i int, code int16) {
			pending[i].ackErr = code
			part()
		})
		<-done
		return
	}
	for _, it := range pending {
		k := share.Key{Group: group, Topic: it.part.topic, TopicID: it.part.topicID, Partition: it.part.partition}
		core.Acknowledge(k, member, it.acks, func(code int16) {
			it.ackErr = code
			part()
		})
	}
	<-done
}

// releases reports whether any of the items' acknowledgements releases
// records (RELEASE), which makes them available to other members.
func releases(items []*shareItem) bool {
	for _, it := range items {
		for _, b := range it.acks {
			if slices.Contains(b.Types, share.AckRelease) {
				return true
			}
		}
	}
	return false
}

// shareAcquireLoop acquires records for the fetched items until MinBytes
// are acquired or the wait ends. It returns the budget bytes held.
func (s *Server) shareAcquireLoop(r *Request, req *kmsg.ShareFetchRequest, group, member string, items []*shareItem, out *Budget) (held int) {
	var fetchable []*shareItem
	for _, it := range items {
		if it.fetch && it.err == 0 {
			fetchable = append(fetchable, it)
		}
	}
	if len(fetchable) == 0 || req.MaxBytes <= 0 {
		return 0
	}
	maxBytes := min(int(req.MaxBytes), maxFetchBytes)
	maxRecords := int64(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = shareDefaultMaxRecords
	}
	minBytes := max(int(req.MinBytes), 1)
	wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait)
	deadline := time.Now().Add(wait)
	tr := r.Tracer()

	var waiter *partition.Waiter
	var parked []*partition.Partition
	defer func() {
		for _, p := range parked {
			p.RemoveWaiter(waiter)
		}
		if waiter != nil {
			s.share.released.remove(group, waiter)
		}
	}()
	total, records := 0, int64(0)
	start := 0 // rotates, so no partition is always served last
	for {
		grant, starved := s.reserveFetch(out, maxBytes-total)
		if !starved && records < maxRecords {
			read, n := s.shareAcquirePass(req, group, member, fetchable, start, grant, maxRecords-records, total == 0)
			held += s.settleFetch(out, grant, read)
			total += read
			records += n
			start = (start + 1) % len(fetchable)
		} else {
			s.settleFetch(out, grant, 0)
		}
		if (total >= minBytes && records > 0) || records >= maxRecords || total >= maxBytes || !time.Now().Before(deadline) {
			return held
		}
		if waiter == nil {
			// Park first, then look again, so an append between the
			// look and the park is not missed.
			waiter = partition.NewWaiter()
			s.share.released.add(group, waiter)
			for _, it := range fetchable {
				if p := s.topics.Partition(it.part.topic, it.part.partition); p != nil {
					p.AddWaiter(waiter)
					parked = append(parked, p)
				}
			}
			continue
		}
		r.clock.end(&r.clock.work) // a long poll's wait is not the request's time
		s.fetchWait(waiter, deadline, starved, out, tr)
		r.clock.begin(&r.clock.work)
	}
}

// shareAcquirePass asks the fetchable partitions for records all at
// once, so that their acquisitions are written together (the share
// manager coalesces the state writes of share-partitions that wait at the
// same time: one replicated write per round, not one per partition).
// A round splits the budget bytes and maxRecords records evenly between
// its partitions, as Kafka splits a share fetch's bytes, the remainders
// going to the partitions from the first-th on (rotated, so none is always
// served last); a partition whose share is zero is not asked. Partitions
// that filled their share may hold more: up to shareAcquireRounds rounds
// share what is left between them, so records on few partitions still fill
// a fetch. A partition asked reads at least its first batch, whatever its
// size (the overshoot is charged to the budgets); with no bytes left only
// the first partition is asked, when the fetch has nothing yet. It returns
// the bytes and records acquired.
func (s *Server) shareAcquirePass(req *kmsg.ShareFetchRequest, group, member string, items []*shareItem, first, budget int, maxRecords int64, firstBatch bool) (read int, records int64) {
	round := make([]*shareItem, 0, len(items))
	for i := range items {
		round = append(round, items[(first+i)%len(items)])
	}
	for r := 0; r < shareAcquireRounds && len(round) > 0; r++ {
		if records >= maxRecords || (budget-read <= 0 && !(firstBatch && read == 0)) {
			break
		}
		n, recs, full := s.shareAcquireRound(req, group, member, round, max(budget-read, 0), maxRecords-records, firstBatch && read == 0)
		read += n
		records += recs
		round = full
	}
	return read, records
}

// shareAcquireRounds bounds the rounds of one pass (each is a state write).
const shareAcquireRounds = 3

// shareAcquireRound is one round of shareAcquirePass over items, in order.
// It returns the bytes and records acquired and the items that filled
// their share.
func (s *Server) shareAcquireRound(req *kmsg.ShareFetchRequest, group, member string, items []*shareItem, budget int, maxRecords int64, firstBatch bool) (read int, records int64, full []*shareItem) {
	n := len(items)
	type asked struct {
		it   *shareItem
		recs int64
		room int
		res  share.AcquireResult
	}
	var asks []*asked
	var reqs []share.AcquireRequest
	for i, it := range items {
		recs := maxRecords / int64(n)
		if int64(i) < maxRecords%int64(n) {
			recs++
		}
		room := budget / n
		if i < budget%n {
			room++
		}
		if recs == 0 || (room == 0 && !(firstBatch && i == 0)) {
			continue
		}
		asks = append(asks, &asked{it: it, recs: recs, room: room})
		reqs = append(reqs, share.AcquireRequest{
			Key:         share.Key{Group: group, Topic: it.part.topic, TopicID: it.part.topicID, Partition: it.part.partition},
			Member:      member,
			MaxRecords:  int32(min(recs, 1<<31-1)),
			BatchSize:   req.BatchSize,
			RecordLimit: req.ShareAcquireMode == 1,
			MaxBytes:    int32(min(max(room, 1), 1<<31-1)),
		})
	}
	var wg sync.WaitGroup
	wg.Add(len(reqs))
	s.shareAcquireAll(reqs, func(i int, res share.AcquireResult) {
		asks[i].res = res
		wg.Done()
	})
	wg.Wait()
	for _, a := range asks {
		it, res := a.it, a.res
		if res.ErrorCode != 0 {
			it.err = res.ErrorCode
			continue
		}
		if len(res.Acquired) == 0 {
			continue
		}
		it.records, it.acquired = mergeShareAcquired(it.records, it.acquired, res.Records, res.Acquired)
		read += len(res.Records)
		got := int64(0)
		for _, r := range res.Acquired {
			got += r.Last - r.First + 1
		}
		records += got
		if got >= a.recs || len(res.Records) >= a.room {
			full = append(full, it)
		}
	}
	return read, records, full
}

// shareBatcher is a ShareCore that writes several share-partitions'
// acquisitions or acknowledgements together (*share.Manager).
type shareBatcher interface {
	AcquireAll(reqs []share.AcquireRequest, reply func(i int, res share.AcquireResult))
	AcknowledgeAll(member string, reqs []share.AckRequest, reply func(i int, errorCode int16))
}

// shareAcquireAll asks for reqs together when the core can, else one by
// one (all at once still); reply(i, res) answers reqs[i].
func (s *Server) shareAcquireAll(reqs []share.AcquireRequest, reply func(i int, res share.AcquireResult)) {
	core := s.share.core
	if b, ok := core.(shareBatcher); ok {
		b.AcquireAll(reqs, reply)
		return
	}
	for i, r := range reqs {
		core.Acquire(r, func(res share.AcquireResult) { reply(i, res) })
	}
}

// shareFetchAssemble writes the items into the response: every partition
// of a fetch opening its session, and otherwise those with records, an
// error or acknowledgements, as Kafka leaves the others out of later
// fetches of a session.
func (s *Server) shareFetchAssemble(resp *kmsg.ShareFetchResponse, items []*shareItem, full bool) {
	leaders := s.newCurrentLeaders()
	topicAt := map[[16]byte]int{}
	for _, it := range items {
		if !full && len(it.acquired) == 0 && it.err == 0 && !it.hasAcks {
			continue
		}
		ti := shareTopicSlot(&resp.Topics, topicAt, it.part.topicID, func(id [16]byte) kmsg.ShareFetchResponseTopic {
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = id
			return t
		})
		p := kmsg.NewShareFetchResponseTopicPartition()
		p.Partition = it.part.partition
		p.ErrorCode = it.err
		p.AcknowledgeErrorCode = it.ackErr
		// Shares are served by the share coordinator: the metadata
		// group's leader (nil topic), whatever group orders the partition.
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leaders.of(it.err, false, nil, 0)
		p.Records = it.records
		if p.Records == nil {
			p.Records = []byte{}
		} else if sp := s.topics.Partition(it.part.topic, it.part.partition); sp != nil {
			sp.CountFetched(len(p.Records))
		}
		for _, a := range it.acquired {
			ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = a.First, a.Last, a.DeliveryCount
			p.AcquiredRecords = append(p.AcquiredRecords, ar)
		}
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, p)
	}
	for _, b := range leaders.endpoints() {
		ep := kmsg.NewShareFetchResponseNodeEndpoint()
		ep.NodeID, ep.Host, ep.Port = b.ID, b.Host, b.Port
		resp.NodeEndpoints = append(resp.NodeEndpoints, ep)
	}
}

// shareFetchSize over-estimates the encoded size of a response.
func shareFetchSize(resp *kmsg.ShareFetchResponse) int {
	n := 128
	for _, t := range resp.Topics {
		n += 32
		for _, p := range t.Partitions {
			n += 64 + len(p.Records) + 24*len(p.AcquiredRecords)
		}
	}
	return n
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
