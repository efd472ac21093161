package protocol

// Fetch: versions 4-18 (record batches; v7+ fetch sessions, KIP-227; v13+
// topics by id). Long polling parks the fetch on its partitions until data
// arrives, min.bytes is met or max.wait.ms passes. Batches are served as
// stored, never re-encoded. read_committed fetches stop at the last stable
// offset and carry the aborted transactions of the range they return.
// On connections that can (plaintext sockets) the stored batches are not
// read at all: they go from the segment files to the socket as file
// ranges (fetch_frame.go, netio/sendfile.go).
// The internal topics answer INVALID_TOPIC_EXCEPTION (internal_topics.go).
// ACLs: each topic needs READ (else its partitions answer
// TOPIC_AUTHORIZATION_FAILED, and are never read).

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/recordbatch"
)

func init() { register(1, 4, 18, (*Server).fetch) }

// maxFetchWait bounds a client's max.wait.ms so a parked fetch cannot pin
// resources for long.
const maxFetchWait = 30 * time.Second

// maxFetchBytes bounds one response regardless of what the client asks.
const maxFetchBytes = 64 << 20

// copyRangeMax is the largest file range a fetch copies into its response
// instead of sending from the file. A tailing consumer's fetch (a batch or
// two, as in EndToEndLatency) sent from the file costs the event loop
// three syscalls (header writev, sendfile, trailer writev) and the fetch a
// page-cache probe; copied, it is one pread here and one writev there.
// Past a few pages the copy costs more than the syscalls it saves.
const copyRangeMax = 16 << 10

type fetchItem struct {
	key      sessionKey
	topicID  [16]byte
	offset   int64
	maxBytes int32
	epoch    int32
	cached   *sessionPartition // nil when sessionless
	denied   bool              // the principal may not READ the topic
	// group is the view of the partition's raft group, which leads it;
	// role how this node serves the partition as that group's member.
	group GroupView
	role  fetchRole
}

func (s *Server) fetch(r *Request) {
	go func() {
		r.clock.begin(&r.clock.work)
		defer func() {
			if p := recover(); p != nil {
				s.log.ErrorContext(r.Context(), "fetch panicked", "panic", p)
				r.Respond(errorResponse(r, p))
			}
		}()
		var out *Budget
		if r.Conn != nil {
			out = r.Conn.Output
		}
		sendsFiles := r.Conn != nil && r.Conn.SendsFiles
		resp, held, files := s.doFetch(r, r.Msg.(*kmsg.FetchRequest), out, r.Tracer(), sendsFiles)
		// The connection counts the response's bytes from here on (the
		// reply charges them before it returns), so the fetch's share is
		// handed over, not freed early.
		resp.SetVersion(r.Version)
		s.pointFetchAtLeader(r, resp)
		s.countFetched(resp, files)
		s.throttleFetch(r, resp, files)
		r.clock.end(&r.clock.work)
		s.throttleRequestTime(r, resp)
		if parts, ok := s.fetchParts(r, resp, files); ok {
			r.RespondParts(parts)
		} else {
			r.RespondSized(resp, fetchResponseSize(resp))
		}
		s.releaseFetch(out, held)
	}()
}

// countFetched adds each partition's record bytes in resp (files[t][p]
// when set, else the partition's RecordBatches) to its fetched count.
func (s *Server) countFetched(resp *kmsg.FetchResponse, files [][]*storage.FileRange) {
	for ti := range resp.Topics {
		rt := &resp.Topics[ti]
		var t *topics.Topic
		for pi := range rt.Partitions {
			p := &rt.Partitions[pi]
			n := len(p.RecordBatches)
			if files != nil && files[ti] != nil && files[ti][pi] != nil {
				n = files[ti][pi].Len()
			}
			if n == 0 {
				continue
			}
			if t == nil {
				if resp.Version >= 13 {
					t = s.topics.GetByID(rt.TopicID)
				} else {
					t = s.topics.Get(rt.Topic)
				}
				if t == nil {
					break
				}
			}
			if p.Partition >= 0 && int(p.Partition) < len(t.Partitions) {
				t.Partitions[p.Partition].CountFetched(n)
			}
		}
	}
}

// Fetch memory: a fetch reserves the bytes it will read from the fetch
// budget, from its connection's output budget and within what the response
// budget has free, before it reads from storage, and holds them until its
// response is handed to the connection, which counts them until they are
// sent. With less free than asked the fetch is served smaller; with none
// it is served one batch (Kafka's first-batch rule, so consumers progress)
// when its connection is under its bound and the fetch budget is not
// spent, which bounds the fetch budget's overshoot at one batch per fetch
// that found it not spent. Otherwise (a connection that does not read its
// responses, or fetches holding the whole fetch budget) it waits for
// budget like a long poll, and answers empty at its deadline.

// reserveFetch reserves up to want bytes for one fetch pass: the bytes
// granted (0: one batch only), or starved when nothing may be read now.
func (s *Server) reserveFetch(out *Budget, want int) (grant int, starved bool) {
	f := s.cfg.FetchBudget
	room := min(int64(want), f.Available(), out.Available(), s.cfg.ResponseBudget.Available())
	if room > 0 {
		g := f.AcquireUpTo(room)
		if o := out.AcquireUpTo(g); o < g {
			f.Release(g - o)
			g = o
		}
		if g > 0 {
			return int(g), false
		}
	}
	if out.Available() > 0 && f.Available() > 0 {
		return 0, false
	}
	return 0, true
}

// settleFetch turns a pass's grant into what it read: the overshoot of a
// first batch is charged, the unread rest given back. It returns the bytes
// now held.
func (s *Server) settleFetch(out *Budget, grant, read int) int {
	f := s.cfg.FetchBudget
	if d := int64(read - grant); d > 0 {
		f.Force(d)
		out.Force(d)
	} else if d < 0 {
		f.Release(-d)
		out.Release(-d)
	}
	return read
}

// fetchWait parks a fetch (Fetch, ShareFetch) once until what may let it
// answer more: an append or release (waiter), the deadline, or, when
// starved, the fetch budget or the connection's output freeing bytes. tr,
// if set, is told how long it waited.
func (s *Server) fetchWait(waiter *partition.Waiter, deadline time.Time, starved bool, out *Budget, tr RequestTrace) {
	var waitStart time.Time
	if tr != nil {
		waitStart = time.Now()
	}
	timer := time.NewTimer(time.Until(deadline))
	var budgetFreed, outFreed <-chan struct{} // nil: not waited on
	if starved {
		budgetFreed, outFreed = s.cfg.FetchBudget.Changed(), out.Changed()
	}
	select {
	case <-waiter.C:
	case <-timer.C:
	case <-budgetFreed:
	case <-outFreed:
	}
	timer.Stop()
	if tr != nil {
		tr.Waited(waitStart)
	}
}

// releaseFetch gives back the bytes a fetch holds.
func (s *Server) releaseFetch(out *Budget, held int) {
	s.cfg.FetchBudget.Release(int64(held))
	out.Release(int64(held))
}

// trimToOffset cuts whole batches so that none starts at or past limit,
// returning the kept bytes and the offset after the last kept batch.
func trimToOffset(b []byte, limit int64) ([]byte, int64) {
	pos, end := 0, int64(-1)
	for pos+recordbatch.HeaderSize <= len(b) {
		h, err := recordbatch.ParseHeader(b[pos:])
		if err != nil || h.BaseOffset >= limit || pos+h.TotalSize() > len(b) {
			break
		}
		pos += h.TotalSize()
		end = h.LastOffset() + 1
	}
	return b[:pos], end
}

// cutAtOffset drops the batches of b that start at or past limit. Unlike
// trimToOffset it keeps a trailing partial batch that starts below limit
// (clients skip one; it is how a fetch's byte limit ends a read).
func cutAtOffset(b []byte, limit int64) []byte {
	pos := 0
	for pos+recordbatch.HeaderSize <= len(b) {
		h, err := recordbatch.ParseHeader(b[pos:])
		if err != nil {
			return b
		}
		if h.BaseOffset >= limit {
			return b[:pos]
		}
		if pos+h.TotalSize() > len(b) {
			return b
		}
		pos += h.TotalSize()
	}
	return b
}

// fetchParts encodes a response whose records are file ranges as parts;
// false when it has none, or fields the parts encoder does not write (the
// ranges are then read into the response, for kmsg to encode).
func (s *Server) fetchParts(r *Request, resp *kmsg.FetchResponse, files [][]*storage.FileRange) ([]Part, bool) {
	if files == nil {
		return nil, false
	}
	if parts, ok := appendFetchFrame(r.CorrelationID, resp, files); ok {
		return parts, true
	}
	for ti, ps := range files {
		for pi, f := range ps {
			if f == nil {
				continue
			}
			p := &resp.Topics[ti].Partitions[pi]
			b, err := f.AppendTo(nil)
			f.Release()
			if err != nil {
				s.log.ErrorContext(r.Context(), "fetch read failed", "topic", resp.Topics[ti].Topic, "partition", p.Partition, "err", err)
				p.ErrorCode, p.AbortedTransactions, b = kerr.KafkaStorageError.Code, nil, []byte{}
			}
			p.RecordBatches = b
		}
	}
	return nil, false
}

// fetchResponseSize over-estimates the encoded size of a fetch response.
func fetchResponseSize(resp *kmsg.FetchResponse) int {
	n := 64
	for _, t := range resp.Topics {
		n += 32 + len(t.Topic)
		for _, p := range t.Partitions {
			n += 64 + len(p.RecordBatches) + 16*len(p.AbortedTransactions)
		}
	}
	return n
}

// doFetch serves one fetch; tr (nil: untraced) is told of every read and
// of the long-poll wait. It returns the response and the bytes it holds of
// the fetch and out budgets (see reserveFetch), for the caller to release
// once the response is handed over. With useFiles, records are read as
// file ranges: files[t][p] (nil: none) are the records of
// resp.Topics[t].Partitions[p], for the caller to send or release; files
// is nil when no partition has any.
func (s *Server) doFetch(r *Request, req *kmsg.FetchRequest, out *Budget, tr RequestTrace, useFiles bool) (resp *kmsg.FetchResponse, held int, files [][]*storage.FileRange) {
	resp = req.ResponseKind().(*kmsg.FetchResponse)
	var passFiles []*storage.FileRange // the last pass's ranges, by item
	defer func() {
		// A panic (answered by fetch's recover) must not keep budget
		// or descriptors.
		if p := recover(); p != nil {
			s.releaseFetch(out, held)
			releaseRanges(passFiles)
			panic(p)
		}
	}()
	byID := req.Version >= 13

	var sess *fetchSession
	incremental := false
	if req.Version >= 7 {
		switch {
		case req.SessionID == 0 && req.SessionEpoch == 0:
			sess = s.sessions.create()
		case req.SessionID == 0:
			// sessionless full fetch (epoch -1)
		case req.SessionEpoch == -1:
			s.sessions.remove(req.SessionID)
		case req.SessionEpoch == 0:
			s.sessions.remove(req.SessionID)
			sess = s.sessions.create()
		default:
			var kerrv *kerr.Error
			sess, kerrv = s.sessions.get(req.SessionID, req.SessionEpoch)
			if kerrv != nil {
				resp.ErrorCode = kerrv.Code
				return resp, 0, nil
			}
			incremental = true
		}
	}

	var items []fetchItem
	reqItem := func(rt kmsg.FetchRequestTopic, rp kmsg.FetchRequestTopicPartition) fetchItem {
		name := rt.Topic
		if byID {
			if t := s.topics.GetByID(rt.TopicID); t != nil {
				name = t.Name
			} else if it, ok := s.internalTopicByID(rt.TopicID); ok {
				name = it.Name
			}
		}
		return fetchItem{key: sessionKey{name, rp.Partition}, topicID: rt.TopicID, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, epoch: rp.CurrentLeaderEpoch}
	}
	if sess != nil {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		if incremental && req.SessionEpoch != sess.epoch {
			resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
			return resp, 0, nil
		}
		sess.lastUsed = time.Now()
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				it := reqItem(rt, rp)
				sess.upsert(sessionPartition{key: it.key, topicID: it.topicID, fetchOffset: it.offset, maxBytes: it.maxBytes})
			}
		}
		for _, ft := range req.ForgottenTopics {
			name := ft.Topic
			if byID {
				if t := s.topics.GetByID(ft.TopicID); t != nil {
					name = t.Name
				} else if it, ok := s.internalTopicByID(ft.TopicID); ok {
					name = it.Name
				}
			}
			for _, p := range ft.Partitions {
				sess.forget(sessionKey{name, p})
			}
		}
		for _, k := range sess.order {
			sp := sess.parts[k]
			items = append(items, fetchItem{key: k, topicID: sp.topicID, offset: sp.fetchOffset, maxBytes: sp.maxBytes, epoch: -1, cached: sp})
		}
		resp.SessionID = sess.id
	} else {
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				items = append(items, reqItem(rt, rp))
			}
		}
	}

	if s.authz != nil {
		// Decided once per topic per request, not per long-poll pass.
		readable := map[string]bool{}
		for i := range items {
			topic := items[i].key.topic
			if topic == "" {
				continue // a topic id naming no topic: UNKNOWN_TOPIC_ID
			}
			ok, seen := readable[topic]
			if !seen {
				ok = s.authorized(r, acls.Read, acls.Topic, topic)
				readable[topic] = ok
			}
			items[i].denied = !ok
		}
	}

	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 || maxBytes > maxFetchBytes {
		maxBytes = maxFetchBytes
	}
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if wait > maxFetchWait {
		wait = maxFetchWait
	}
	deadline := time.Now().Add(wait)
	s.fetchRoles(req, items)

	var results []kmsg.FetchResponseTopicPartition
	var waiter *partition.Waiter
	var parked []*partition.Partition
	defer func() {
		for _, p := range parked {
			p.RemoveWaiter(waiter)
		}
	}()
	for {
		var total int
		var anyErr bool
		s.releaseFetch(out, held)
		held = 0
		grant, starved := s.reserveFetch(out, maxBytes)
		held = grant
		if starved {
			grant = -1 // read nothing: offsets and errors only
		}
		releaseRanges(passFiles) // an earlier pass's, not answered
		results, passFiles, total, anyErr = s.fetchPass(items, grant, byID, req.IsolationLevel == 1, useFiles, tr)
		held = s.settleFetch(out, held, total)
		if (total >= int(req.MinBytes) && !starved) || anyErr || wait <= 0 || !time.Now().Before(deadline) || len(items) == 0 {
			break
		}
		if waiter == nil {
			// Park first, then read again, so an append between the
			// read and the park is not missed.
			waiter = partition.NewWaiter()
			for _, it := range items {
				if p := s.topics.Partition(it.key.topic, it.key.partition); p != nil {
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
	outOfRangeOnFollower(items, results)

	// Assemble, dropping unchanged partitions from incremental answers.
	var lastTopic *kmsg.FetchResponseTopic
	anyFile := false
	for i, it := range items {
		res := results[i]
		var f *storage.FileRange
		if passFiles != nil {
			f = passFiles[i]
		}
		if sp := it.cached; sp != nil {
			changed := len(res.RecordBatches) > 0 || f != nil || res.ErrorCode != 0 || res.HighWatermark != sp.lastHW || res.LastStableOffset != sp.lastLSO || res.LogStartOffset != sp.lastLogStart
			sp.lastHW, sp.lastLSO, sp.lastLogStart = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
			if incremental && !changed {
				continue
			}
		}
		if lastTopic == nil || lastTopic.Topic != it.key.topic || lastTopic.TopicID != it.topicID {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = it.key.topic, it.topicID
			resp.Topics = append(resp.Topics, rt)
			lastTopic = &resp.Topics[len(resp.Topics)-1]
			files = append(files, nil)
		}
		lastTopic.Partitions = append(lastTopic.Partitions, res)
		files[len(files)-1] = append(files[len(files)-1], f)
		anyFile = anyFile || f != nil
	}
	passFiles = nil // handed over in files
	if !anyFile {
		files = nil
	}
	if incremental {
		// A new session expects epoch 1 next; each incremental fetch
		// moves the expectation on by one.
		sess.epoch++
		if sess.epoch <= 0 {
			sess.epoch = 1
		}
	}
	return resp, held, files
}

// releaseRanges releases a pass's file ranges (nil entries: none).
func releaseRanges(rs []*storage.FileRange) {
	for _, r := range rs {
		r.Release()
	}
}

// fetchPass reads every item once within the byte budget (0: one batch,
// negative: no reads, offsets only); tr (nil: untraced) is told of each
// read. With useFiles the records are file ranges (files, by item; nil
// when none was read), else bytes in RecordBatches.
func (s *Server) fetchPass(items []fetchItem, budget int, byID, readCommitted, useFiles bool, tr RequestTrace) (out []kmsg.FetchResponseTopicPartition, files []*storage.FileRange, total int, anyErr bool) {
	out = make([]kmsg.FetchResponseTopicPartition, len(items))
	for i, it := range items {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = it.key.partition
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
		rp.PreferredReadReplica = -1
		// librdkafka refuses a null record set; Kafka sends an empty one.
		rp.RecordBatches = []byte{}
		if it.denied {
			rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			out[i] = rp
			anyErr = true
			continue
		}
		p := s.topics.Partition(it.key.topic, it.key.partition)
		if p == nil {
			rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if byID && s.topics.GetByID(it.topicID) == nil {
				rp.ErrorCode = kerr.UnknownTopicID.Code
			}
			if isInternalTopic(it.key.topic) {
				// Not Kafka records: refused, see internal_topics.go.
				rp.ErrorCode = kerr.InvalidTopicException.Code
			}
			out[i] = rp
			anyErr = true
			continue
		}
		role := it.role
		if !role.follower && !it.group.Serving() {
			// Followers serve only consumers the leader sent them
			// (fetch_replica.go); others must follow the leader.
			rp.ErrorCode = kerr.NotLeaderForPartition.Code
			out[i] = rp
			anyErr = true
			continue
		}
		if code := leaderEpochError(it.group, it.epoch); code != 0 {
			rp.ErrorCode = code
			out[i] = rp
			anyErr = true
			continue
		}
		// One view for the offsets and the aborted list: read apart, a
		// last stable offset past an ABORT marker could meet a list from
		// before it, and aborted records go out as committed.
		view := p.View()
		hw, lso := view.HighWatermark, view.LastStable
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = hw, lso, p.LogStartOffset()
		limitOffset := hw
		if readCommitted {
			limitOffset = lso
		}
		if role.follower && it.offset > hw && it.offset >= rp.LogStartOffset {
			// Not applied here yet: waited for, then out of range
			// (outOfRangeOnFollower).
			out[i] = rp
			continue
		}
		if it.offset < rp.LogStartOffset || it.offset > hw {
			rp.ErrorCode = kerr.OffsetOutOfRange.Code
			out[i] = rp
			anyErr = true
			continue
		}
		if role.preferred >= 0 {
			// The consumer's rack has an in-sync follower: it reads
			// there, and this answer carries no records.
			rp.PreferredReadReplica = role.preferred
			out[i] = rp
			anyErr = true // answer at once
			continue
		}
		limit := int(it.maxBytes)
		if rem := budget - total; rem < limit {
			limit = rem
		}
		if it.offset < limitOffset && budget >= 0 && (limit > 0 || total == 0) {
			if limit <= 0 {
				limit = 1
			}
			var readStart time.Time
			if tr != nil {
				readStart = time.Now()
			}
			var b []byte
			var fr *storage.FileRange
			var err error
			if useFiles {
				fr, err = p.Log().ReadRange(it.offset, limit, total > 0)
			} else {
				b, err = p.Read(it.offset, limit, total > 0)
			}
			if tr != nil {
				n := len(b)
				if fr != nil {
					n = fr.Len()
				}
				tr.Read(it.key.topic, it.key.partition, it.offset, n, readStart, err)
			}
			switch {
			case errors.Is(err, storage.ErrOffsetOutOfRange):
				rp.ErrorCode = kerr.OffsetOutOfRange.Code
				anyErr = true
			case err != nil:
				rp.ErrorCode = kerr.KafkaStorageError.Code
				anyErr = true
				s.log.ErrorContext(ctxOf(tr), "fetch read failed", "topic", it.key.topic, "partition", it.key.partition, "offset", it.offset, "err", err)
			case fr != nil && (fr.Len() <= copyRangeMax || !fr.Cached()):
				// Read here instead: small (copyRangeMax: one write
				// costs less than sendfile's three), or not in the page
				// cache (sendfile would read the disk on the event loop).
				b, err = fr.AppendTo(nil)
				fr.Release()
				fr = nil
				if err != nil {
					rp.ErrorCode = kerr.KafkaStorageError.Code
					anyErr = true
					s.log.ErrorContext(ctxOf(tr), "fetch read failed", "topic", it.key.topic, "partition", it.key.partition, "offset", it.offset, "err", err)
					break
				}
				total += setRecords(&rp, b, hw, limitOffset, readCommitted, view, it.offset)
			case fr != nil:
				// As setRecords cuts bytes: nothing past the high
				// watermark, nor the last stable offset when
				// read_committed.
				end := fr.CutBefore(limitOffset)
				if end < 0 {
					fr.Release()
					break
				}
				if readCommitted {
					rp.AbortedTransactions = abortedIn(view, it.offset, end, partition.SpansHold(fr.Batches()))
				}
				if files == nil {
					files = make([]*storage.FileRange, len(items))
				}
				files[i] = fr
				total += fr.Len()
			case len(b) > 0:
				total += setRecords(&rp, b, hw, limitOffset, readCommitted, view, it.offset)
			}
		}
		out[i] = rp
	}
	return out, files, total, anyErr
}

// setRecords makes the batches b, read from offset from, rp's records and
// returns their size. The log may already hold appends the published view
// does not cover yet (single node: the log is written before the
// produce's answer publishes the new high watermark). A client told of an
// offset past the high watermark hw would fetch it next and be refused
// with OFFSET_OUT_OF_RANGE, which clients take as lost data: batches from
// hw on are cut, and from limit (the last stable offset) when
// read_committed, which also lists the range's aborted transactions.
func setRecords(rp *kmsg.FetchResponseTopicPartition, b []byte, hw, limit int64, readCommitted bool, view *partition.ReadView, from int64) int {
	b = cutAtOffset(b, hw)
	if readCommitted {
		var end int64
		b, end = trimToOffset(b, limit)
		if len(b) > 0 {
			rp.AbortedTransactions = abortedIn(view, from, end, batchesHold(b))
		}
	}
	rp.RecordBatches = b
	return len(b)
}

// abortedIn lists the aborted transactions of [from, end) in view, as the
// response carries them (nil: none). has tells which offsets the read
// holds: the view was taken before the read, and a compaction pass in
// between may have dropped the ABORT marker of a transaction the view
// lists (see partition.ReadView.AbortedInRead).
func abortedIn(view *partition.ReadView, from, end int64, has func(int64) bool) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	var out []kmsg.FetchResponseTopicPartitionAbortedTransaction
	for _, a := range view.AbortedInRead(from, end, has) {
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
		out = append(out, at)
	}
	return out
}

// batchesHold returns abortedIn's has for the whole batches of b (the
// batch headers are walked only if it is asked).
func batchesHold(b []byte) func(int64) bool {
	var hold func(int64) bool
	return func(off int64) bool {
		if hold == nil {
			var spans []storage.BatchSpan
			for pos := 0; pos+recordbatch.HeaderSize <= len(b); {
				h, err := recordbatch.ParseHeader(b[pos:])
				if err != nil || pos+h.TotalSize() > len(b) {
					break
				}
				pos += h.TotalSize()
				spans = append(spans, storage.BatchSpan{BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), End: int64(pos)})
			}
			hold = partition.SpansHold(spans)
		}
		return hold(off)
	}
}
