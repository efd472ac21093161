package protocol

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/features"
	"github.com/regent-broker/regent/actors/share"
)

// fakeShare is a ShareCore that records the calls and acquires what
// `avail` holds (offsets First..Last, taken once).
type fakeShare struct {
	mu       sync.Mutex
	calls    []string
	avail    []share.AcquiredRange
	acquires int
	ackCode  int16
	released []share.Key
}

func (f *fakeShare) log(c string) { f.mu.Lock(); f.calls = append(f.calls, c); f.mu.Unlock() }

func (f *fakeShare) Acquire(req share.AcquireRequest, reply func(share.AcquireResult)) {
	f.mu.Lock()
	f.acquires++
	f.calls = append(f.calls, "acquire")
	res := share.AcquireResult{Acquired: f.avail, Records: []byte{}, LockTimeoutMs: 15000}
	if len(f.avail) > 0 {
		res.Records = []byte("batches")
	}
	f.avail = nil
	f.mu.Unlock()
	go reply(res)
}

func (f *fakeShare) Acknowledge(k share.Key, member string, acks []share.AckBatch, reply func(int16)) {
	f.log("ack")
	f.mu.Lock()
	c := f.ackCode
	f.mu.Unlock()
	go reply(c)
}

func (f *fakeShare) ReleaseMember(k share.Key, member string, reply func(int16)) {
	f.mu.Lock()
	f.released = append(f.released, k)
	f.mu.Unlock()
	go reply(0)
}

func (f *fakeShare) ReleaseGroupMember(group, member string, reply func(int16)) { go reply(0) }
func (f *fakeShare) StartOffsets(group string, parts []share.TopicPartition, reply func([]share.StartOffset)) {
	var out []share.StartOffset
	for _, p := range parts {
		out = append(out, share.StartOffset{Topic: p.Topic, TopicID: p.TopicID, Partition: p.Partition, StartOffset: 7, Lag: 3})
	}
	go reply(out)
}
func (f *fakeShare) AlterStartOffsets(group string, offs []share.StartOffset, reply func([]share.StartOffsetResult)) {
	go reply(nil)
}
func (f *fakeShare) DeleteState(group string, topics []string, reply func(int16)) { go reply(0) }
func (f *fakeShare) DeleteGroup(group string, reply func(int16))                  { go reply(0) }

func shareFetchReq(version int16, id [16]byte, epoch int32, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = version
	req.GroupID, req.MemberID = kmsg.StringPtr("g"), kmsg.StringPtr("m1")
	req.ShareSessionEpoch = epoch
	req.MaxRecords, req.BatchSize = 100, 100
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.AcknowledgementBatches = acks
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// shareAckReq is a ShareAcknowledge of member of group "g" at epoch,
// accepting offsets first..last of partition p of topic id.
func shareAckReq(version int16, member string, epoch int32, id [16]byte, p int32, first, last int64) *kmsg.ShareAcknowledgeRequest {
	ar := kmsg.NewPtrShareAcknowledgeRequest()
	ar.Version, ar.GroupID, ar.MemberID, ar.ShareSessionEpoch = version, kmsg.StringPtr("g"), kmsg.StringPtr(member), epoch
	art := kmsg.NewShareAcknowledgeRequestTopic()
	art.TopicID = id
	arp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	arp.Partition = p
	ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = first, last, []int8{1}
	arp.AcknowledgementBatches = append(arp.AcknowledgementBatches, ab)
	art.Partitions = append(art.Partitions, arp)
	ar.Topics = append(ar.Topics, art)
	return ar
}

func ack(first, last int64, t int8) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
	b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
	b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = first, last, []int8{t}
	return b
}

func TestShareFetchSessionsAndAcks(t *testing.T) {
	s := groupServer(t)
	f := &fakeShare{avail: []share.AcquiredRange{{First: 0, Last: 9, DeliveryCount: 1}}}
	s.SetShare(f, func(string) share.Config { return share.Config{RecordLockDuration: 15 * time.Second} })
	id := s.topics.Get("t").ID

	for _, v := range []int16{1, 2} {
		resp := call[*kmsg.ShareFetchResponse](t, s, shareFetchReq(v, id, 0, ack(0, 1, 1)))
		code(t, "v"+string(rune('0'+v))+" open with acks", resp.ErrorCode, kerr.InvalidRequest)
	}

	resp := call[*kmsg.ShareFetchResponse](t, s, shareFetchReq(2, id, 0))
	code(t, "open", resp.ErrorCode, nil)
	if resp.AcquisitionLockTimeoutMillis != 15000 {
		t.Fatalf("lock timeout %d, want 15000", resp.AcquisitionLockTimeoutMillis)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("topics %+v", resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	if len(p.AcquiredRecords) != 1 || p.AcquiredRecords[0].LastOffset != 9 || string(p.Records) != "batches" {
		t.Fatalf("partition %+v", p)
	}

	// Epoch 2 is not the next one.
	resp = call[*kmsg.ShareFetchResponse](t, s, shareFetchReq(2, id, 2))
	code(t, "epoch 2 after open", resp.ErrorCode, kerr.InvalidShareSessionEpoch)

	// Acknowledgements go before the acquisition; an ack error is the
	// partition's AcknowledgeErrorCode.
	f.mu.Lock()
	f.calls, f.ackCode = nil, kerr.InvalidRecordState.Code
	f.mu.Unlock()
	req := shareFetchReq(2, id, 1, ack(0, 9, 1))
	resp = call[*kmsg.ShareFetchResponse](t, s, req)
	code(t, "epoch 1", resp.ErrorCode, nil)
	f.mu.Lock()
	calls := f.calls
	f.mu.Unlock()
	if len(calls) < 2 || calls[0] != "ack" || calls[1] != "acquire" {
		t.Fatalf("calls %v, want ack then acquire", calls)
	}
	code(t, "ack error", resp.Topics[0].Partitions[0].AcknowledgeErrorCode, kerr.InvalidRecordState)

	// Malformed acknowledgements are refused before they reach the core.
	bad := ack(5, 9, 1)
	bad.AcknowledgeTypes = []int8{1, 1}
	resp = call[*kmsg.ShareFetchResponse](t, s, shareFetchReq(2, id, 2, bad))
	code(t, "bad ack", resp.Topics[0].Partitions[0].AcknowledgeErrorCode, kerr.InvalidRequest)
	renew := ack(5, 9, 4)
	resp = call[*kmsg.ShareFetchResponse](t, s, shareFetchReq(2, id, 3, renew))
	code(t, "renew without IsRenewAck", resp.Topics[0].Partitions[0].AcknowledgeErrorCode, kerr.InvalidRequest)
	// A renewing fetch asks for no records, and gets none.
	rf := shareFetchReq(2, id, 4, renew)
	rf.IsRenewAck = true
	resp = call[*kmsg.ShareFetchResponse](t, s, rf)
	code(t, "renewing fetch asking for records", resp.ErrorCode, kerr.InvalidRequest)
	rf.MaxRecords, rf.BatchSize, rf.MaxBytes = 0, 0, 0
	f.mu.Lock()
	f.calls = nil
	f.mu.Unlock()
	resp = call[*kmsg.ShareFetchResponse](t, s, rf)
	code(t, "renewing fetch", resp.ErrorCode, nil)
	code(t, "renew ack", resp.Topics[0].Partitions[0].AcknowledgeErrorCode, kerr.InvalidRecordState)
	f.mu.Lock()
	calls = f.calls
	f.mu.Unlock()
	if len(calls) != 1 || calls[0] != "ack" {
		t.Fatalf("renewing fetch made calls %v, want one ack and no acquisition", calls)
	}

	// ShareAcknowledge: epoch 0 is refused; -1 closes the session and
	// releases the member's records.
	ar := kmsg.NewPtrShareAcknowledgeRequest()
	ar.Version = 2
	ar.GroupID, ar.MemberID = kmsg.StringPtr("g"), kmsg.StringPtr("m1")
	art := kmsg.NewShareAcknowledgeRequestTopic()
	art.TopicID = id
	arp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = 0, 9, []int8{1}
	arp.AcknowledgementBatches = append(arp.AcknowledgementBatches, ab)
	art.Partitions = append(art.Partitions, arp)
	ar.Topics = append(ar.Topics, art)
	ar.ShareSessionEpoch = 0
	aresp := call[*kmsg.ShareAcknowledgeResponse](t, s, ar)
	code(t, "ack epoch 0", aresp.ErrorCode, kerr.InvalidShareSessionEpoch)
	f.mu.Lock()
	f.ackCode = 0
	f.mu.Unlock()
	ar.ShareSessionEpoch = -1
	aresp = call[*kmsg.ShareAcknowledgeResponse](t, s, ar)
	code(t, "ack close", aresp.ErrorCode, nil)
	code(t, "ack close partition", aresp.Topics[0].Partitions[0].ErrorCode, nil)
	if aresp.AcquisitionLockTimeoutMillis != 15000 {
		t.Fatalf("ack lock timeout %d", aresp.AcquisitionLockTimeoutMillis)
	}
	f.mu.Lock()
	released := len(f.released)
	f.mu.Unlock()
	if released != 1 {
		t.Fatalf("released %d partitions on close, want 1", released)
	}
	resp = call[*kmsg.ShareFetchResponse](t, s, shareFetchReq(2, id, 6))
	code(t, "fetch after close", resp.ErrorCode, kerr.ShareSessionNotFound)

	// An id that names no topic.
	resp = call[*kmsg.ShareFetchResponse](t, s, shareFetchReq(1, [16]byte{9, 9}, 0))
	code(t, "unknown id", resp.Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicID)
}

// TestShareFetchLongPoll: a fetch that finds nothing waits, and answers
// as soon as another member's release makes records available, well
// before its MaxWaitMs; with nothing, it answers empty at MaxWaitMs.
func TestShareFetchLongPoll(t *testing.T) {
	s := groupServer(t)
	f := &fakeShare{}
	s.SetShare(f, nil)
	id := s.topics.Get("t").ID

	req := shareFetchReq(2, id, 0)
	req.MaxWaitMillis = 300
	start := time.Now()
	resp := call[*kmsg.ShareFetchResponse](t, s, req)
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("empty long poll answered after %v, want >= 300ms", el)
	}
	if resp.AcquisitionLockTimeoutMillis != 30000 || len(resp.Topics[0].Partitions[0].AcquiredRecords) != 0 {
		t.Fatalf("empty long poll: %+v", resp)
	}

	f.mu.Lock()
	base := f.acquires
	f.mu.Unlock()
	req = shareFetchReq(2, id, 1)
	req.MaxWaitMillis = 20000
	done := make(chan *kmsg.ShareFetchResponse, 1)
	go func() { done <- call[*kmsg.ShareFetchResponse](t, s, req) }()
	// Once the fetch has looked twice (before and after parking) and
	// found nothing, another member leaves: its records come back, and
	// the release wakes the waiting fetch at once, not at its deadline.
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		n := f.acquires - base
		if n >= 2 {
			f.avail = []share.AcquiredRange{{First: 3, Last: 4, DeliveryCount: 2}}
		}
		f.mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fetch never looked for records")
		}
		select {
		case r := <-done:
			t.Fatalf("answered before records were available: %+v", r)
		case <-time.After(5 * time.Millisecond):
		}
	}
	released := time.Now()
	s.ShareMemberLeft("g", "another-member")
	select {
	case resp = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting fetch did not pick the records up")
	}
	if el := time.Since(released); el >= 5*time.Second { // its MaxWaitMs is 20 s
		t.Fatalf("picked up %v after the release: the release did not wake the fetch", el)
	}
	got := resp.Topics[0].Partitions[0].AcquiredRecords
	if len(got) != 1 || got[0].FirstOffset != 3 || got[0].DeliveryCount != 2 {
		t.Fatalf("acquired %+v", got)
	}
}

func TestShareAPIsAdvertisedOnlyWhenServed(t *testing.T) {
	s := groupServer(t)
	advertised := func() map[int16]bool {
		resp := call[*kmsg.ApiVersionsResponse](t, s, &kmsg.ApiVersionsRequest{Version: 2})
		out := map[int16]bool{}
		for _, k := range resp.ApiKeys {
			out[k.ApiKey] = true
		}
		return out
	}
	if a := advertised(); a[78] || a[79] || a[90] {
		t.Fatal("share APIs advertised without a share manager")
	}
	resp := call[*kmsg.ShareFetchResponse](t, s, shareFetchReq(1, [16]byte{1}, 0))
	code(t, "fetch unserved", resp.ErrorCode, kerr.UnsupportedVersion)
	s.SetShare(&fakeShare{}, nil)
	if a := advertised(); !a[78] || !a[79] || !a[90] || !a[91] || !a[92] {
		t.Fatal("share APIs not advertised with a share manager")
	}
}

// TestShareAuthorization: ShareFetch and ShareAcknowledge need READ on the
// group (else GROUP_AUTHORIZATION_FAILED and nothing is done) and READ on
// each topic (else its partitions answer TOPIC_AUTHORIZATION_FAILED and
// nothing is acquired from them); the offset admin APIs check the group.
func TestShareAuthorization(t *testing.T) {
	var allowAll atomic.Bool
	s, store, _ := aclServer(t, &allowAll)
	f := &fakeShare{avail: []share.AcquiredRange{{First: 0, Last: 0, DeliveryCount: 1}}}
	s.SetShare(f, nil)
	id := s.topics.Get("t").ID

	resp := call[*kmsg.ShareFetchResponse](t, s, shareFetchReq(2, id, 0))
	code(t, "fetch without READ on the group", resp.ErrorCode, kerr.GroupAuthorizationFailed)
	ar := kmsg.NewPtrShareAcknowledgeRequest()
	ar.Version, ar.GroupID, ar.MemberID, ar.ShareSessionEpoch = 1, kmsg.StringPtr("g"), kmsg.StringPtr("m1"), 1
	code(t, "ack without READ on the group", call[*kmsg.ShareAcknowledgeResponse](t, s, ar).ErrorCode, kerr.GroupAuthorizationFailed)
	dr := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	dg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	dg.GroupID = "g"
	dr.Groups = append(dr.Groups, dg)
	code(t, "describe offsets without DESCRIBE on the group", call[*kmsg.DescribeShareGroupOffsetsResponse](t, s, dr).Groups[0].ErrorCode, kerr.GroupAuthorizationFailed)
	alt := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alt.GroupID = "g"
	code(t, "alter offsets without READ on the group", call[*kmsg.AlterShareGroupOffsetsResponse](t, s, alt).ErrorCode, kerr.GroupAuthorizationFailed)
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = "g"
	code(t, "delete offsets without DELETE on the group", call[*kmsg.DeleteShareGroupOffsetsResponse](t, s, del).ErrorCode, kerr.GroupAuthorizationFailed)
	f.mu.Lock()
	n := f.acquires
	f.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d acquisitions without READ on the group", n)
	}

	if err := store.Create([]acls.ACL{anon(acls.Group, acls.Literal, "g", acls.Read, acls.Allow)}); err != nil {
		t.Fatal(err)
	}
	resp = call[*kmsg.ShareFetchResponse](t, s, shareFetchReq(2, id, 0))
	code(t, "fetch with READ on the group", resp.ErrorCode, nil)
	code(t, "partition without READ on the topic", resp.Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
	f.mu.Lock()
	n = f.acquires
	f.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d acquisitions without READ on the topic", n)
	}

	if err := store.Create([]acls.ACL{anon(acls.Topic, acls.Literal, "t", acls.Read, acls.Allow)}); err != nil {
		t.Fatal(err)
	}
	resp = call[*kmsg.ShareFetchResponse](t, s, shareFetchReq(2, id, 1))
	code(t, "partition with READ on the topic", resp.Topics[0].Partitions[0].ErrorCode, nil)
	if len(resp.Topics[0].Partitions[0].AcquiredRecords) != 1 {
		t.Fatalf("acquired %+v", resp.Topics[0].Partitions[0].AcquiredRecords)
	}
}

// TestShareFetchOnFollower: a node that does not serve answers every
// partition NOT_LEADER_OR_FOLLOWER with the leader and its endpoint, opens
// no session and acquires nothing.
func TestShareFetchOnFollower(t *testing.T) {
	s := groupServer(t)
	f := &fakeShare{avail: []share.AcquiredRange{{First: 0, Last: 0, DeliveryCount: 1}}}
	s.SetShare(f, nil)
	id := s.topics.Get("t").ID
	v := &fakeView{self: 2}
	v.leader.Store(1)
	s.cluster = v

	resp := call[*kmsg.ShareFetchResponse](t, s, shareFetchReq(2, id, 0))
	code(t, "top level", resp.ErrorCode, nil)
	p := resp.Topics[0].Partitions[0]
	code(t, "partition", p.ErrorCode, kerr.NotLeaderForPartition)
	if p.CurrentLeader.LeaderID != 1 || len(resp.NodeEndpoints) != 1 || resp.NodeEndpoints[0].NodeID != 1 || resp.NodeEndpoints[0].Port != 9092 {
		t.Fatalf("leader %+v endpoints %+v", p.CurrentLeader, resp.NodeEndpoints)
	}
	if n := s.share.sessions.len(); n != 0 {
		t.Fatalf("%d sessions on a follower", n)
	}
	f.mu.Lock()
	n := f.acquires
	f.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d acquisitions on a follower", n)
	}

	aresp := call[*kmsg.ShareAcknowledgeResponse](t, s, shareAckReq(2, "m1", 3, id, 0, 0, 0))
	code(t, "ack top level", aresp.ErrorCode, nil)
	code(t, "ack partition", aresp.Topics[0].Partitions[0].ErrorCode, kerr.NotLeaderForPartition)
	if aresp.Topics[0].Partitions[0].CurrentLeader.LeaderID != 1 || len(aresp.NodeEndpoints) != 1 {
		t.Fatalf("ack leader %+v endpoints %+v", aresp.Topics[0].Partitions[0].CurrentLeader, aresp.NodeEndpoints)
	}
}

// TestShareConnClosed: the close of the connection that opened a session
// ends it and releases its member's records on its partitions.
func TestShareConnClosed(t *testing.T) {
	s := groupServer(t)
	f := &fakeShare{}
	s.SetShare(f, nil)
	p := sharePart{topicID: s.topics.Get("t").ID, topic: "t", partition: 1}
	if _, err := s.share.sessions.open(shareSessionKey{group: "g", member: "m"}, []sharePart{p}, 42); err != nil {
		t.Fatal(err)
	}
	s.ConnClosed(41)
	if s.share.sessions.len() != 1 {
		t.Fatal("another connection's close ended the session")
	}
	s.ConnClosed(42)
	if s.share.sessions.len() != 0 {
		t.Fatal("the session outlived its connection")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		rel := f.released
		f.mu.Unlock()
		if len(rel) == 1 && rel[0].Topic == "t" && rel[0].Partition == 1 && rel[0].Group == "g" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("released %v, want g/t-1", rel)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestShareVersionGatesShareGroups: with share.version finalized at 1 (a
// new cluster) the share APIs are advertised and served; downgraded to 0
// they are neither, and ShareFetch answers UNSUPPORTED_VERSION, as Kafka's
// broker does.
func TestShareVersionGatesShareGroups(t *testing.T) {
	s := groupServer(t)
	fs, err := features.Open(features.Options{DataDir: t.TempDir(), NodeID: 1, Logger: s.log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Close() })
	if err := fs.Init(); err != nil {
		t.Fatal(err)
	}
	s.SetFeatures(fs)
	s.SetShare(&fakeShare{}, nil)
	advertised := func() bool {
		for _, k := range call[*kmsg.ApiVersionsResponse](t, s, &kmsg.ApiVersionsRequest{Version: 2}).ApiKeys {
			if k.ApiKey == 78 {
				return true
			}
		}
		return false
	}
	if !advertised() {
		t.Fatal("ShareFetch not advertised at share.version 1")
	}
	done := make(chan error, 1)
	fs.Update([]features.Update{{Feature: features.ShareVersion, Level: 0, Type: features.SafeDowngrade}}, func(err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("downgrade not answered")
	}
	if advertised() {
		t.Fatal("ShareFetch advertised at share.version 0")
	}
	resp := call[*kmsg.ShareFetchResponse](t, s, shareFetchReq(2, s.topics.Get("t").ID, 0))
	code(t, "fetch at share.version 0", resp.ErrorCode, kerr.UnsupportedVersion)
}

// TestShareOffsetAdmin: AlterShareGroupOffsets makes a missing share group
// and sets start offsets through the share core; with a member it answers
// NON_EMPTY_GROUP (as DeleteShareGroupOffsets does); a consumer group's id
// is GROUP_ID_NOT_FOUND; unknown topics and partitions are refused per
// entry; DescribeShareGroupOffsets answers the core's start offsets.
func TestShareOffsetAdmin(t *testing.T) {
	s := groupServer(t)
	s.SetShare(&fakeShare{}, nil)

	alter := func(group string, part int32, off int64, topic string) *kmsg.AlterShareGroupOffsetsResponse {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = group
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		rp.Partition, rp.StartOffset = part, off
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return call[*kmsg.AlterShareGroupOffsetsResponse](t, s, req)
	}
	resp := alter("sg", 1, 5, "t")
	code(t, "alter on a new group", resp.ErrorCode, nil)
	code(t, "alter partition", resp.Topics[0].Partitions[0].ErrorCode, nil)
	if resp.Topics[0].TopicID != s.topics.Get("t").ID {
		t.Fatalf("alter topic id %x", resp.Topics[0].TopicID)
	}
	code(t, "alter unknown partition", alter("sg", 7, 5, "t").Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
	code(t, "alter unknown topic", alter("sg", 0, 5, "nope").Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
	code(t, "alter negative offset", alter("sg", 0, -2, "t").Topics[0].Partitions[0].ErrorCode, kerr.InvalidRequest)

	dr := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	dr.Version = 1 // with the lag
	dg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	dg.GroupID = "sg"
	dt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	dt.Topic, dt.Partitions = "t", []int32{1, 9}
	dg.Topics = append(dg.Topics, dt)
	dr.Groups = append(dr.Groups, dg)
	dresp := call[*kmsg.DescribeShareGroupOffsetsResponse](t, s, dr)
	code(t, "describe", dresp.Groups[0].ErrorCode, nil)
	got := map[int32]kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition{}
	for _, p := range dresp.Groups[0].Topics[0].Partitions {
		got[p.Partition] = p
	}
	if p := got[1]; p.StartOffset != 7 || p.Lag != 3 || p.ErrorCode != 0 {
		t.Fatalf("describe partition 1: %+v", p)
	}
	code(t, "describe unknown partition", got[9].ErrorCode, kerr.UnknownTopicOrPartition)

	// A member makes the group non-empty.
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = 1, "sg", "member-1", 0, []string{"t"}
	code(t, "join", call[*kmsg.ShareGroupHeartbeatResponse](t, s, hb).ErrorCode, nil)
	code(t, "alter with a member", alter("sg", 1, 5, "t").ErrorCode, kerr.NonEmptyGroup)
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = "sg"
	dtp := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
	dtp.Topic = "t"
	del.Topics = append(del.Topics, dtp)
	code(t, "delete with a member", call[*kmsg.DeleteShareGroupOffsetsResponse](t, s, del).ErrorCode, kerr.NonEmptyGroup)

	// A consumer group's id is not a share group.
	cg := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cg.Version, cg.Group, cg.MemberID, cg.MemberEpoch, cg.RebalanceTimeoutMillis, cg.SubscribedTopicNames = 1, "cg", "c-1", 0, 30000, []string{"t"}
	cg.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	code(t, "consumer join", call[*kmsg.ConsumerGroupHeartbeatResponse](t, s, cg).ErrorCode, nil)
	code(t, "alter a consumer group", alter("cg", 0, 1, "t").ErrorCode, kerr.GroupIDNotFound)
	dg.GroupID = "cg"
	dr.Groups[0] = dg
	code(t, "describe a consumer group", call[*kmsg.DescribeShareGroupOffsetsResponse](t, s, dr).Groups[0].ErrorCode, kerr.GroupIDNotFound)
	del.GroupID = "nope"
	code(t, "delete offsets of no group", call[*kmsg.DeleteShareGroupOffsetsResponse](t, s, del).ErrorCode, kerr.GroupIDNotFound)
}

// TestShareMemberLeftWithSessionOpen: a member's group leave does not end
// a share session still open on its connection (librdkafka sends the
// leave heartbeat and the closing ShareAcknowledge at once, on two
// connections): the acknowledgement that follows the leave is applied,
// and its final epoch ends the session and releases what the member
// still held. A session with no known connection ends at the leave.
func TestShareMemberLeftWithSessionOpen(t *testing.T) {
	s := groupServer(t)
	f := &fakeShare{}
	s.SetShare(f, nil)
	id := s.topics.Get("t").ID
	p := sharePart{topicID: id, topic: "t", partition: 1}
	if _, err := s.share.sessions.open(shareSessionKey{group: "g", member: "m"}, []sharePart{p}, 42); err != nil {
		t.Fatal(err)
	}
	s.ShareMemberLeft("g", "m")
	if s.share.sessions.len() != 1 {
		t.Fatal("the leave ended a session open on its connection")
	}
	aresp := call[*kmsg.ShareAcknowledgeResponse](t, s, shareAckReq(1, "m", -1, id, 1, 0, 9))
	code(t, "closing ack after the leave", aresp.ErrorCode, nil)
	code(t, "closing ack partition", aresp.Topics[0].Partitions[0].ErrorCode, nil)
	if s.share.sessions.len() != 0 {
		t.Fatal("the final-epoch acknowledgement left the session open")
	}
	f.mu.Lock()
	acked, released := slices.Contains(f.calls, "ack"), len(f.released)
	f.mu.Unlock()
	if !acked || released != 1 {
		t.Fatalf("acknowledged %v, released %d partitions: want the ack applied, then t-1 released", acked, released)
	}

	if _, err := s.share.sessions.open(shareSessionKey{group: "g", member: "n"}, []sharePart{p}, 0); err != nil {
		t.Fatal(err)
	}
	s.ShareMemberLeft("g", "n")
	if s.share.sessions.len() != 0 {
		t.Fatal("a session with no known connection outlived its member's leave")
	}
}

// TestShareFetchMaxBytesZero: a share fetch with MaxBytes 0 acquires
// nothing (Kafka's fetch size is the least of MaxBytes and its limits),
// answered without error; the same fetch with room acquires.
func TestShareFetchMaxBytesZero(t *testing.T) {
	s := groupServer(t)
	f := &fakeShare{avail: []share.AcquiredRange{{First: 0, Last: 9, DeliveryCount: 1}}}
	s.SetShare(f, nil)
	id := s.topics.Get("t").ID
	req := shareFetchReq(2, id, 0)
	req.MaxBytes = 0
	resp := call[*kmsg.ShareFetchResponse](t, s, req)
	code(t, "fetch with MaxBytes 0", resp.ErrorCode, nil)
	if got := resp.Topics[0].Partitions[0].AcquiredRecords; len(got) != 0 {
		t.Fatalf("MaxBytes 0 acquired %+v", got)
	}
	f.mu.Lock()
	acquires := f.acquires
	f.mu.Unlock()
	if acquires != 0 {
		t.Fatalf("MaxBytes 0 asked the share manager %d times", acquires)
	}
	req = shareFetchReq(2, id, 1)
	req.MaxBytes = 1 << 20
	resp = call[*kmsg.ShareFetchResponse](t, s, req)
	if got := resp.Topics[0].Partitions[0].AcquiredRecords; len(got) != 1 || got[0].LastOffset != 9 {
		t.Fatalf("MaxBytes 1 MiB acquired %+v", got)
	}
}
