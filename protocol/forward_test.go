package protocol

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/topics"
)

// fakeView is a ClusterView whose leader and serving flag tests change.
type fakeView struct {
	self    int32
	leader  atomic.Int32
	serving atomic.Bool
	// leaderAfter, when positive, hides the leader (-1) from that many
	// Leader calls first: an election in progress. servingIn, when
	// positive, turns serving on at that Serving call: a leader catching up.
	leaderAfter, servingIn atomic.Int32
	// index is the state index; each StateIndex call adds step to it
	// first (a node applying as it is asked).
	index atomic.Uint64
	step  uint64
}

func (v *fakeView) StateIndex() uint64 { return v.index.Add(v.step) }

func (v *fakeView) Brokers() []BrokerAddr {
	return []BrokerAddr{{ID: 1, Host: "127.0.0.1", Port: 9092}, {ID: 2, Host: "127.0.0.1", Port: 9093}}
}

func (v *fakeView) Leader() int32 {
	if v.leaderAfter.Add(-1) >= 0 {
		return -1
	}
	return v.leader.Load()
}
func (v *fakeView) Serving() bool {
	if v.servingIn.Load() > 0 && v.servingIn.Add(-1) == 0 {
		v.serving.Store(true)
	}
	return v.serving.Load()
}

func (v *fakeView) Voters() []int32    { return []int32{1, 2} }
func (v *fakeView) InSync() []int32    { return []int32{1, 2} }
func (v *fakeView) LeaderEpoch() int32 { return 1 }
func (v *fakeView) ClusterID() string  { return "c" }

// Group: one raft group leads everything.
func (v *fakeView) Group(uint8) GroupView { return v }

// forwardPair is a leader (node 1) and a follower (node 2) each with its
// own registry (no replication between them): the follower forwards
// straight to the leader's ServeForwarded; sent counts the forwards.
func forwardPair(t *testing.T) (leader, follower *Server, fview *fakeView, sent *atomic.Int32) {
	t.Helper()
	leader, follower = groupServer(t), groupServer(t)
	lview := &fakeView{self: 1}
	lview.leader.Store(1)
	lview.serving.Store(true)
	leader.cluster = lview
	fview = &fakeView{self: 2}
	fview.leader.Store(1)
	follower.cluster, follower.cfg.NodeID = fview, 2
	sent = &atomic.Int32{}
	follower.SetForwarder(func(ctx context.Context, to int32, fr ForwardedRequest) ([]byte, uint64, error) {
		sent.Add(1)
		if to != 1 {
			t.Errorf("forwarded to node %d, want 1", to)
		}
		return leader.ServeForwarded(ctx, fr)
	})
	// The leader forwards nothing: it serves.
	leader.SetForwarder(func(context.Context, int32, ForwardedRequest) ([]byte, uint64, error) {
		t.Error("the serving leader forwarded a request")
		return nil, 0, errors.New("no")
	})
	return leader, follower, fview, sent
}

func createTopicsReq(timeoutMs int32, names ...string) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = 7, timeoutMs
	for _, n := range names {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 2, -1
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func TestForwardedRequestServedByTheLeader(t *testing.T) {
	leader, follower, _, sent := forwardPair(t)
	resp := call[*kmsg.CreateTopicsResponse](t, follower, createTopicsReq(5000, "x"))
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].NumPartitions != 2 {
		t.Fatalf("CreateTopics through the follower: %+v", resp.Topics)
	}
	if leader.topics.Get("x") == nil || follower.topics.Get("x") != nil {
		t.Fatalf("x on the leader: %v, on the follower: %v (want only the leader)", leader.topics.Get("x") != nil, follower.topics.Get("x") != nil)
	}
	if resp.Topics[0].TopicID != leader.topics.Get("x").ID {
		t.Fatalf("answered topic id %x, the leader's is %x", resp.Topics[0].TopicID, leader.topics.Get("x").ID)
	}
	if sent.Load() != 1 {
		t.Fatalf("%d forwards, want 1", sent.Load())
	}
	// Reads are answered by the follower itself.
	if got := metadataTopics(t, follower, "t"); len(got) != 1 || got[0].ErrorCode != 0 || sent.Load() != 1 {
		t.Fatalf("Metadata of t on the follower: %+v, %d forwards", got, sent.Load())
	}
	// The follower names itself as controller; the leader too.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	if c := call[*kmsg.MetadataResponse](t, follower, md).ControllerID; c != 2 {
		t.Fatalf("follower's controller id %d, want 2 (itself)", c)
	}
}

// The leader authorizes the principal and host the follower forwarded.
func TestForwardedPrincipalAuthorizedOnTheLeader(t *testing.T) {
	leader, follower, _, _ := forwardPair(t)
	var no atomic.Bool
	store, err := acls.Open(acls.Options{DataDir: t.TempDir(), Logger: leader.log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	obs := &denialCounter{}
	leader.SetAuthorizer(acls.NewAuthorizer(store, nil, no.Load), obs)
	// Allowed from the client's host only (call's requests come from
	// 10.1.2.3): the forward carries it.
	if err := store.Create([]acls.ACL{
		{ResourceType: acls.Topic, ResourceName: "ok-", PatternType: kmsg.ACLResourcePatternTypePrefixed, Principal: AnonymousPrincipal, Host: "10.1.2.3", Operation: kmsg.ACLOperationCreate, Permission: kmsg.ACLPermissionTypeAllow},
	}); err != nil {
		t.Fatal(err)
	}
	resp := call[*kmsg.CreateTopicsResponse](t, follower, createTopicsReq(5000, "ok-1", "other"))
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.ErrorCode
	}
	if codes["ok-1"] != 0 || codes["other"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("codes %v: want ok-1 created, other TOPIC_AUTHORIZATION_FAILED", codes)
	}
	if obs.count("CREATE/TOPIC") != 1 {
		t.Fatalf("the leader reported %d CREATE/TOPIC denials, want 1", obs.count("CREATE/TOPIC"))
	}
}

// No leader for a while (an election): the follower waits and forwards
// once one is known.
func TestForwardWaitsForALeader(t *testing.T) {
	leader, follower, fview, sent := forwardPair(t)
	fview.leaderAfter.Store(5)
	resp := call[*kmsg.CreateTopicsResponse](t, follower, createTopicsReq(10000, "late"))
	if resp.Topics[0].ErrorCode != 0 || leader.topics.Get("late") == nil || sent.Load() != 1 {
		t.Fatalf("CreateTopics after the election: %+v, %d forwards", resp.Topics, sent.Load())
	}
}

// A leader that is not serving is retried until the deadline, then the
// client gets REQUEST_TIMED_OUT, nothing applied.
func TestForwardTimesOutWithoutALeader(t *testing.T) {
	leader, follower, _, sent := forwardPair(t)
	leader.cluster.(*fakeView).serving.Store(false)
	start := time.Now()
	resp := call[*kmsg.CreateTopicsResponse](t, follower, createTopicsReq(300, "never"))
	took := time.Since(start)
	rt := resp.Topics[0]
	if rt.ErrorCode != kerr.RequestTimedOut.Code || rt.ErrorMessage == nil || !strings.Contains(*rt.ErrorMessage, "nothing was applied") {
		t.Fatalf("CreateTopics with no serving leader: %+v", rt)
	}
	if took < 300*time.Millisecond || took > 5*time.Second {
		t.Fatalf("answered after %v, want the request's 300 ms timeout", took)
	}
	if sent.Load() < 2 || leader.topics.Get("never") != nil {
		t.Fatalf("%d forwards (want retries), topic created: %v", sent.Load(), leader.topics.Get("never") != nil)
	}
}

// A forward lost after it was sent: REQUEST_TIMED_OUT, outcome unknown,
// not retried.
func TestForwardOutcomeUnknown(t *testing.T) {
	_, follower, _, _ := forwardPair(t)
	var n atomic.Int32
	follower.SetForwarder(func(context.Context, int32, ForwardedRequest) ([]byte, uint64, error) {
		n.Add(1)
		return nil, 0, errors.New("connection reset")
	})
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	req.Resources = append(req.Resources, rr)
	resp := call[*kmsg.IncrementalAlterConfigsResponse](t, follower, req)
	r := resp.Resources[0]
	if r.ErrorCode != kerr.RequestTimedOut.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "may or may not") || r.ResourceName != "t" || n.Load() != 1 {
		t.Fatalf("lost forward: %+v after %d sends", r, n.Load())
	}
}

// The follower is elected while it waits: it serves the request itself.
func TestForwardServedHereOnceLeading(t *testing.T) {
	_, follower, fview, sent := forwardPair(t)
	// Elected, serving from the third look on: the handler's look sees a
	// follower, the forward's first a leader catching up, then serving.
	fview.leader.Store(2)
	fview.servingIn.Store(3)
	resp := call[*kmsg.CreateTopicsResponse](t, follower, createTopicsReq(10000, "mine"))
	if resp.Topics[0].ErrorCode != 0 || follower.topics.Get("mine") == nil || sent.Load() != 0 {
		t.Fatalf("CreateTopics on the new leader: %+v, %d forwards", resp.Topics, sent.Load())
	}
}

func TestServeForwardedRefuses(t *testing.T) {
	leader, _, _, _ := forwardPair(t)
	produce := kmsg.NewPtrProduceRequest()
	produce.Version = 9
	if _, _, err := leader.ServeForwarded(context.Background(), ForwardedRequest{Key: 0, Version: 9, Body: produce.AppendTo(nil)}); !errors.Is(err, ErrForwardRefused) {
		t.Fatalf("forwarded Produce: %v, want ErrForwardRefused", err)
	}
	if _, _, err := leader.ServeForwarded(context.Background(), ForwardedRequest{Key: 19, Version: 7, Body: []byte{1, 2}}); !errors.Is(err, ErrForwardRefused) {
		t.Fatalf("forwarded garbage: %v, want ErrForwardRefused", err)
	}
	leader.cluster.(*fakeView).serving.Store(false)
	ct := createTopicsReq(1000, "y")
	if _, _, err := leader.ServeForwarded(context.Background(), ForwardedRequest{Key: 19, Version: 7, Body: ct.AppendTo(nil)}); !errors.Is(err, ErrNotServing) {
		t.Fatalf("forward to a node not serving: %v, want ErrNotServing", err)
	}
}

// Metadata auto-creation on a follower: created by the leader; answered
// LEADER_NOT_AVAILABLE until this node applied it, then with the topic.
func TestMetadataAutoCreateThroughTheLeader(t *testing.T) {
	leader, follower, _, sent := forwardPair(t)
	md := func(name string) kmsg.MetadataResponseTopic {
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.AllowAutoTopicCreation = 12, true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		return call[*kmsg.MetadataResponse](t, follower, req).Topics[0]
	}
	if got := md("auto"); got.ErrorCode != kerr.LeaderNotAvailable.Code || leader.topics.Get("auto") == nil || sent.Load() != 1 {
		t.Fatalf("auto-created topic not yet applied here: %v, on the leader: %v, %d forwards", kerr.ErrorForCode(got.ErrorCode), leader.topics.Get("auto") != nil, sent.Load())
	}
	// Replication reaching this node, as the FSM would apply it.
	if _, err := follower.topics.Create(topics.CreateSpec{Name: "auto", Partitions: -1, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	if got := md("auto"); got.ErrorCode != 0 || len(got.Partitions) == 0 || sent.Load() != 1 {
		t.Fatalf("applied topic: %v with %d partitions, %d forwards", kerr.ErrorForCode(got.ErrorCode), len(got.Partitions), sent.Load())
	}
	// An invalid name is refused here, never forwarded.
	if got := md("bad/name"); got.ErrorCode != kerr.InvalidTopicException.Code || sent.Load() != 1 {
		t.Fatalf("invalid name: %v, %d forwards", kerr.ErrorForCode(got.ErrorCode), sent.Load())
	}
}

// A forwarded change is answered once the follower's state holds what the
// leader's held when it answered: read-your-writes on the node asked.
func TestForwardAnsweredOnceAppliedHere(t *testing.T) {
	leader, follower, fview, _ := forwardPair(t)
	leader.cluster.(*fakeView).index.Store(40)
	fview.step = 1 // one more entry applied at each look
	resp := call[*kmsg.CreateTopicsResponse](t, follower, createTopicsReq(5000, "ryw"))
	if resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %+v", resp.Topics)
	}
	if got := fview.index.Load(); got < 40 {
		t.Fatalf("answered with the follower's state at %d, the leader's was 40", got)
	}
	// A follower that does not catch up answers anyway, after
	// forwardApplyWait.
	fview.step = 0
	leader.cluster.(*fakeView).index.Store(1 << 40)
	start := time.Now()
	resp = call[*kmsg.CreateTopicsResponse](t, follower, createTopicsReq(5000, "lagging"))
	if took := time.Since(start); resp.Topics[0].ErrorCode != 0 || took < forwardApplyWait || took > forwardApplyWait+5*time.Second {
		t.Fatalf("lagging follower: %+v after %v", resp.Topics, took)
	}
}
