package protocol

// Produce: versions 3-13 (record batches, magic 2; v13 names topics by id).
// acks 0, 1 and -1 are served; in single-node mode an append is committed
// when it is written, so acks=1 and acks=all answer at the same point (with
// the fsync policy deciding whether that point is the OS or the disk).
// A transactional batch goes to its partition through the transaction
// coordinator (produce_txn.go): v3-11 only if the partition was added to
// the transaction (KIP-890 part 1: else INVALID_TXN_STATE), v12+ adding it
// (part 2); transactional batches without a transactional id are refused
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka does). Batches are
// validated as Kafka's LogValidator does, contents included:
// CORRUPT_MESSAGE for a CRC or framing fault, INVALID_RECORD (with
// record_errors where one record is at fault) for counts, offsets or
// compressed contents that contradict the header, and for compressed
// records inflating past 32 x max.message.bytes, within 16-256 MiB (Kafka
// has no such bound; it stops decompression bombs). The internal topics
// answer INVALID_TOPIC_EXCEPTION, as Kafka answers clients
// (internal_topics.go).
//
// ACLs: a transactional produce needs WRITE on its transactional id (else
// every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and each
// topic WRITE (else its partitions answer TOPIC_AUTHORIZATION_FAILED).

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/storage/recordbatch"
)

func init() { register(0, 3, 13, (*Server).produce) }

func (s *Server) produce(r *Request) {
	req := r.Msg.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	s.throttleProduce(r, req, resp)

	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		for i, rt := range req.Topics {
			resp.Topics[i] = produceTopicError(rt, kerr.InvalidRequiredAcks)
		}
		r.Respond(resp)
		return
	}
	if (req.TransactionID != nil && !s.authorized(r, acls.Write, acls.TransactionalID, *req.TransactionID)) || untaggedTransactionalRecords(req) {
		for i, rt := range req.Topics {
			resp.Topics[i] = produceTopicError(rt, kerr.TransactionalIDAuthorizationFailed)
		}
		r.Respond(resp)
		return
	}

	tr := r.partitionTracer()
	// Every partition answers once; the last one answers the request.
	var mu sync.Mutex
	pending := 1
	// recordsFree stays true while every partition that took records
	// says it holds nothing of them: the frame they alias can be reused.
	recordsFree := true
	finish := func() {
		mu.Lock()
		pending--
		last := pending == 0
		free := recordsFree
		mu.Unlock()
		if !last {
			return
		}
		if free {
			r.FreeFrame()
		}
		if req.Acks == 0 {
			r.NoResponse()
			return
		}
		s.pointProduceAtLeader(r, resp)
		r.Respond(resp)
	}
	for i, rt := range req.Topics {
		out := &resp.Topics[i]
		out.Topic, out.TopicID = rt.Topic, rt.TopicID
		out.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		t := s.topics.Get(rt.Topic)
		if req.Version >= 13 {
			t = s.topics.GetByID(rt.TopicID)
		}
		// From v13 a topic id that names a stored topic is not an
		// internal one (those are metadata only, with ids derived from
		// the cluster id): skipping the check spares every produce two
		// SHA-256s per topic (~1% of the broker's CPU under
		// ProducerPerformance). Before v13 the check is a name compare.
		internal := ""
		if req.Version < 13 || t == nil {
			internal = s.internalProduceTarget(req.Version, rt)
		}
		writable := true
		if s.authz != nil {
			name := rt.Topic
			if req.Version >= 13 && t != nil {
				name = t.Name
			}
			if internal != "" {
				name = internal
			}
			writable = (req.Version >= 13 && t == nil && internal == "") || s.authorized(r, acls.Write, acls.Topic, name)
		}
		for j, rp := range rt.Partitions {
			po := &out.Partitions[j]
			*po = kmsg.NewProduceResponseTopicPartition()
			po.Partition = rp.Partition
			po.BaseOffset, po.LogAppendTime, po.LogStartOffset = -1, -1, -1
			if !writable {
				po.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if internal != "" {
				// Kafka's answer to a client appending to an internal topic.
				po.ErrorCode = kerr.InvalidTopicException.Code
				po.ErrorMessage = kmsg.StringPtr("Cannot append to internal topic " + internal)
				continue
			}
			if t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				po.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if req.Version >= 13 && t == nil {
					po.ErrorCode = kerr.UnknownTopicID.Code
				}
				continue
			}
			// The partition's raft group orders its appends: only that
			// group's leader takes them.
			g := s.partitionGroup(t, rp.Partition)
			if !g.Serving() {
				po.ErrorCode = kerr.NotLeaderForPartition.Code
				continue
			}
			// acks=all promises min.insync.replicas copies, as Kafka does;
			// raft's majority is the floor beneath it.
			if req.Acks == -1 && t.Config.MinInsyncReplicas > 1 && len(g.InSync()) < int(t.Config.MinInsyncReplicas) {
				po.ErrorCode = kerr.NotEnoughReplicas.Code
				continue
			}
			mu.Lock()
			pending++
			mu.Unlock()
			part := t.Partitions[rp.Partition]
			size, records := len(rp.Records), batchRecords(rp.Records)
			s.appendProduce(req, t.Name, rp.Partition, part, tr, rp.Records, func(res partition.ProduceResult) {
				if res.Err == nil {
					part.CountProduced(size, records)
				}
				if !res.RecordsFree {
					mu.Lock()
					recordsFree = false
					mu.Unlock()
				}
				po.ErrorCode = errorCode(res.Err)
				if res.Err != nil && res.ErrMessage != "" {
					msg := res.ErrMessage
					po.ErrorMessage = &msg
				}
				// record_errors (KIP-467) encode from v8; older versions
				// drop them and keep the error message.
				for _, re := range res.RecordErrors {
					msg := re.Message
					po.ErrorRecords = append(po.ErrorRecords, kmsg.ProduceResponseTopicPartitionErrorRecord{RelativeOffset: re.BatchIndex, ErrorMessage: &msg})
				}
				po.BaseOffset, po.LogAppendTime, po.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
				finish()
			})
		}
	}
	finish()
}

func produceTopicError(rt kmsg.ProduceRequestTopic, code *kerr.Error) kmsg.ProduceResponseTopic {
	out := kmsg.ProduceResponseTopic{Topic: rt.Topic, TopicID: rt.TopicID}
	for _, rp := range rt.Partitions {
		po := kmsg.NewProduceResponseTopicPartition()
		po.Partition = rp.Partition
		po.ErrorCode = code.Code
		po.BaseOffset, po.LogAppendTime, po.LogStartOffset = -1, -1, -1
		out.Partitions = append(out.Partitions, po)
	}
	return out
}

// batchRecords is the records the batches in b say they hold (the
// headers' counts; appends validate them).
func batchRecords(b []byte) int {
	n := 0
	for len(b) >= recordbatch.HeaderSize {
		h, err := recordbatch.ParseHeader(b)
		if err != nil || h.TotalSize() > len(b) {
			break
		}
		n += int(max(h.NumRecords, 0))
		b = b[h.TotalSize():]
	}
	return n
}
