package protocol

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/group"
	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/storage/logconfig"
)

// brokerServer is groupServer with broker config overrides.
func brokerServer(t *testing.T, overrides map[string]string) *Server {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	dir := t.TempDir()
	reg, err := topics.Open(topics.Options{DataDir: dir, Root: sys.Root, Logger: quiet, Broker: logconfig.Broker{Overrides: overrides}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Create(topics.CreateSpec{Name: "t", Partitions: 3, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	cfg := group.DefaultConfig()
	cfg.InitialRebalanceDelay = 0
	groups, err := group.NewManager(group.Options{DataDir: dir, Root: sys.Root, Config: &cfg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		groups.Close()
		reg.Close()
		sys.Shutdown()
	})
	return NewServer(Config{NodeID: 1, Host: "127.0.0.1", Port: 9092, ClusterID: "c1", Logger: quiet}, reg, nil, groups, nil)
}

func findTopic(ts []kmsg.MetadataResponseTopic, name string) *kmsg.MetadataResponseTopic {
	for i := range ts {
		if ts[i].Topic != nil && *ts[i].Topic == name {
			return &ts[i]
		}
	}
	return nil
}

func TestMetadataInternalTopics(t *testing.T) {
	s := brokerServer(t, map[string]string{"offsets.topic.num.partitions": "7"})
	for _, v := range []int16{0, 1, 4, 9, 10, 12, 13} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		if v == 0 {
			req.Topics = []kmsg.MetadataRequestTopic{}
		}
		all := call[*kmsg.MetadataResponse](t, s, req).Topics
		for _, want := range []struct {
			name  string
			parts int
		}{{offsetsTopic, 7}, {txnStateTopic, 50}} {
			mt := findTopic(all, want.name)
			if mt == nil {
				t.Fatalf("v%d all topics: no %s in %d topics", v, want.name, len(all))
			}
			if v >= 1 && !mt.IsInternal {
				t.Fatalf("v%d: %s is_internal false", v, want.name)
			}
			if len(mt.Partitions) != want.parts {
				t.Fatalf("v%d: %s has %d partitions, want %d", v, want.name, len(mt.Partitions), want.parts)
			}
			for _, p := range mt.Partitions {
				if p.Leader != 1 || p.ErrorCode != 0 || !slices.Equal(p.Replicas, []int32{1}) {
					t.Fatalf("v%d: %s partition %+v, want led by node 1", v, want.name, p)
				}
			}
		}
		if mt := findTopic(all, "t"); mt == nil || mt.IsInternal {
			t.Fatalf("v%d: t missing or internal: %+v", v, mt)
		}
	}

	// Named, with auto-creation allowed: served, never created.
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.AllowAutoTopicCreation = 12, true
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(offsetsTopic)}}
	got := call[*kmsg.MetadataResponse](t, s, req).Topics
	if len(got) != 1 || got[0].ErrorCode != 0 || !got[0].IsInternal || len(got[0].Partitions) != 7 {
		t.Fatalf("named %s: %+v", offsetsTopic, got)
	}
	if s.topics.Get(offsetsTopic) != nil {
		t.Fatalf("%s was created in the registry", offsetsTopic)
	}
	id := got[0].TopicID
	if id == ([16]byte{}) {
		t.Fatal("no topic id")
	}

	// By id (v12+): the same topic; the id is stable.
	req = kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = []kmsg.MetadataRequestTopic{{TopicID: id}}
	got = call[*kmsg.MetadataResponse](t, s, req).Topics
	if len(got) != 1 || got[0].ErrorCode != 0 || got[0].Topic == nil || *got[0].Topic != offsetsTopic || got[0].TopicID != id {
		t.Fatalf("by id: %+v", got)
	}
	if other := internalTopicID("c1", txnStateTopic); other == id || internalTopicID("c2", offsetsTopic) == id {
		t.Fatal("internal topic ids collide across names or clusters")
	}
}

// TestInternalTopicLeaderIsCoordinator: each internal topic partition is
// led by the node FindCoordinator names for groups and transactional ids.
func TestInternalTopicLeaderIsCoordinator(t *testing.T) {
	s := brokerServer(t, nil)
	all := metadataTopics(t, s)
	for kt, topic := range map[int8]string{0: offsetsTopic, 1: txnStateTopic} {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 4, kt, []string{"k1", "k2"}
		resp := call[*kmsg.FindCoordinatorResponse](t, s, fc)
		mt := findTopic(all, topic)
		for _, c := range resp.Coordinators {
			if c.ErrorCode != 0 {
				t.Fatalf("FindCoordinator %d: %v", kt, kerr.ErrorForCode(c.ErrorCode))
			}
			for _, p := range mt.Partitions {
				if p.Leader != c.NodeID {
					t.Fatalf("%s partition %d led by %d, coordinator is %d", topic, p.Partition, p.Leader, c.NodeID)
				}
			}
		}
	}
}

func TestProduceFetchListOffsetsInternalTopic(t *testing.T) {
	s := brokerServer(t, nil)
	id := internalTopicID("c1", offsetsTopic)
	for _, v := range []int16{3, 9, 12, 13} {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = v, -1, 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = offsetsTopic, id
		rt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: buildBatch(t, 0, nil)}}
		req.Topics = append(req.Topics, rt)
		resp := call[*kmsg.ProduceResponse](t, s, req)
		p := resp.Topics[0].Partitions[0]
		code(t, "produce", p.ErrorCode, kerr.InvalidTopicException)
		if v >= 8 && (p.ErrorMessage == nil || *p.ErrorMessage != "Cannot append to internal topic __consumer_offsets") {
			t.Fatalf("v%d message %v", v, p.ErrorMessage)
		}
	}

	for _, v := range []int16{4, 12, 13} {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.SessionEpoch = v, 0, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = txnStateTopic, internalTopicID("c1", txnStateTopic)
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = 3, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := call[*kmsg.FetchResponse](t, s, req)
		code(t, "fetch", resp.Topics[0].Partitions[0].ErrorCode, kerr.InvalidTopicException)
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 7
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = offsetsTopic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = 0, -2
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	resp := call[*kmsg.ListOffsetsResponse](t, s, lo)
	code(t, "list offsets", resp.Topics[0].Partitions[0].ErrorCode, kerr.InvalidTopicException)
}

func TestDescribeConfigsInternalTopic(t *testing.T) {
	s := brokerServer(t, nil)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version, req.IncludeSynonyms = 4, true
	for _, name := range []string{offsetsTopic, txnStateTopic} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, name
		req.Resources = append(req.Resources, rr)
	}
	resp := call[*kmsg.DescribeConfigsResponse](t, s, req)
	for _, r := range resp.Resources {
		code(t, "describe "+r.ResourceName, r.ErrorCode, nil)
		found := false
		for _, c := range r.Configs {
			if c.Name == "cleanup.policy" {
				found = true
				if c.Value == nil || *c.Value != "compact" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
					t.Fatalf("%s cleanup.policy %v source %v, want compact, DYNAMIC_TOPIC_CONFIG", r.ResourceName, c.Value, c.Source)
				}
			}
		}
		if !found || len(r.Configs) < 10 {
			t.Fatalf("%s: %d configs, cleanup.policy found %v", r.ResourceName, len(r.Configs), found)
		}
	}
}

// TestBrokerConfigsInForce: the partition counts DescribeConfigs reports
// are those Metadata shows.
func TestBrokerConfigsInForce(t *testing.T) {
	for _, overrides := range []map[string]string{nil, {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "11"}} {
		s := brokerServer(t, overrides)
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = 4
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
		rr.ConfigNames = []string{"offsets.topic.num.partitions", "transaction.state.log.num.partitions"}
		req.Resources = append(req.Resources, rr)
		resp := call[*kmsg.DescribeConfigsResponse](t, s, req)
		all := metadataTopics(t, s)
		for _, c := range resp.Resources[0].Configs {
			topic := offsetsTopic
			if strings.HasPrefix(c.Name, "transaction") {
				topic = txnStateTopic
			}
			if mt := findTopic(all, topic); c.Value == nil || *c.Value != strconv.Itoa(len(mt.Partitions)) {
				t.Fatalf("%s reported %v, %s has %d partitions", c.Name, c.Value, topic, len(mt.Partitions))
			}
		}
		if len(resp.Resources[0].Configs) != 2 {
			t.Fatalf("configs %+v", resp.Resources[0].Configs)
		}
	}
}

// TestGroupRegexMatchesInternalTopics: the broker-side (KIP-848) regex
// resolution sees the internal topics, as Kafka's does.
func TestGroupRegexMatchesInternalTopics(t *testing.T) {
	s := brokerServer(t, nil)
	src := registryTopics{s: s}
	names := src.TopicNames()
	for _, want := range []string{"t", offsetsTopic, txnStateTopic} {
		if !slices.Contains(names, want) {
			t.Fatalf("TopicNames %v lacks %s", names, want)
		}
	}
	id, parts, ok := src.Topic(offsetsTopic)
	if !ok || parts != 50 || id != internalTopicID("c1", offsetsTopic) {
		t.Fatalf("Topic(%s) = %x %d %v", offsetsTopic, id, parts, ok)
	}

	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch = 1, "g", "m1-client-made-id", 0
	hb.RebalanceTimeoutMillis = 10000
	hb.SubscribedTopicRegex = kmsg.StringPtr("__consumer_.*")
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp := call[*kmsg.ConsumerGroupHeartbeatResponse](t, s, hb)
	code(t, "heartbeat", resp.ErrorCode, nil)
	if resp.Assignment == nil || len(resp.Assignment.Topics) != 1 || resp.Assignment.Topics[0].TopicID != id || len(resp.Assignment.Topics[0].Partitions) != 50 {
		t.Fatalf("assignment %+v, want the 50 partitions of %s", resp.Assignment, offsetsTopic)
	}
}

func TestInternalTopicsHiddenWithoutDescribe(t *testing.T) {
	var allowAll atomic.Bool
	s, store, _ := aclServer(t, &allowAll)
	if got := metadataTopics(t, s); len(got) != 0 {
		t.Fatalf("all topics without DESCRIBE: %d topics", len(got))
	}
	if got := metadataTopics(t, s, offsetsTopic); len(got) != 1 || got[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("named without DESCRIBE: %+v", got)
	}
	if err := store.Create([]acls.ACL{anon(acls.Topic, acls.Literal, offsetsTopic, acls.Describe, acls.Allow)}); err != nil {
		t.Fatal(err)
	}
	if got := metadataTopics(t, s); len(got) != 1 || *got[0].Topic != offsetsTopic || !got[0].IsInternal {
		t.Fatalf("all topics with DESCRIBE on %s: %+v", offsetsTopic, got)
	}
}

func TestCreateDeleteInternalTopics(t *testing.T) {
	s := brokerServer(t, nil)
	for _, validateOnly := range []bool{false, true} {
		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.Version, ct.ValidateOnly = 7, validateOnly
		for _, name := range []string{offsetsTopic, txnStateTopic} {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
			ct.Topics = append(ct.Topics, rt)
		}
		resp := call[*kmsg.CreateTopicsResponse](t, s, ct)
		for _, ot := range resp.Topics {
			code(t, "create "+ot.Topic, ot.ErrorCode, kerr.TopicAlreadyExists)
			if ot.ErrorMessage == nil || *ot.ErrorMessage != "Topic '"+ot.Topic+"' already exists." {
				t.Fatalf("create %s: message %v", ot.Topic, ot.ErrorMessage)
			}
		}
	}
	if s.topics.Get(offsetsTopic) != nil {
		t.Fatal("CreateTopics made a registry topic")
	}

	for _, v := range []int16{1, 5, 6} {
		dt := kmsg.NewPtrDeleteTopicsRequest()
		dt.Version = v
		if v < 6 {
			dt.TopicNames = []string{offsetsTopic}
		} else {
			dt.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr(txnStateTopic)}, {TopicID: internalTopicID("c1", offsetsTopic)}}
		}
		resp := call[*kmsg.DeleteTopicsResponse](t, s, dt)
		for _, ot := range resp.Topics {
			code(t, fmt.Sprintf("v%d delete", v), ot.ErrorCode, kerr.InvalidTopicException)
			if v >= 6 && (ot.Topic == nil || !isInternalTopic(*ot.Topic)) {
				t.Fatalf("v%d delete answered %+v", v, ot)
			}
		}
	}
	if got := metadataTopics(t, s, offsetsTopic, txnStateTopic); got[0].ErrorCode != 0 || got[1].ErrorCode != 0 {
		t.Fatalf("internal topics after the refused deletes: %+v", got)
	}
}

// TestFetchSessionForgetsInternalTopicByID: a session's internal
// partition, named by id, is forgotten by id.
func TestFetchSessionForgetsInternalTopicByID(t *testing.T) {
	s := brokerServer(t, nil)
	id := internalTopicID("c1", offsetsTopic)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.SessionID, req.SessionEpoch = 13, 0, 0, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes = 1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := call[*kmsg.FetchResponse](t, s, req)
	if resp.SessionID == 0 || len(resp.Topics) != 1 {
		t.Fatalf("full fetch: session %d, %+v", resp.SessionID, resp.Topics)
	}
	code(t, "fetch", resp.Topics[0].Partitions[0].ErrorCode, kerr.InvalidTopicException)

	inc := kmsg.NewPtrFetchRequest()
	inc.Version, inc.MaxWaitMillis, inc.SessionID, inc.SessionEpoch = 13, 0, resp.SessionID, 1
	inc.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{TopicID: id, Partitions: []int32{1}}}
	resp = call[*kmsg.FetchResponse](t, s, inc)
	code(t, "incremental fetch", resp.ErrorCode, nil)
	if len(resp.Topics) != 0 {
		t.Fatalf("forgotten partition still fetched: %+v", resp.Topics)
	}
}

// TestGroupRegexResolvesDescribableTopics: with an authorizer, a regex
// resolves to the topics the heartbeating principal may DESCRIBE, as
// Kafka's resolution filters them.
func TestGroupRegexResolvesDescribableTopics(t *testing.T) {
	var allowAll atomic.Bool
	s, store, _ := aclServer(t, &allowAll)
	if _, err := s.topics.Create(topics.CreateSpec{Name: "t2", Partitions: 2, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	if err := store.Create([]acls.ACL{
		anon(acls.Group, acls.Literal, "g", acls.Read, acls.Allow),
		anon(acls.Topic, acls.Literal, "t2", acls.Describe, acls.Allow),
	}); err != nil {
		t.Fatal(err)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch = 1, "g", "m1-client-made-id", 0
	hb.RebalanceTimeoutMillis = 10000
	hb.SubscribedTopicRegex = kmsg.StringPtr("t.*|__.*")
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp := call[*kmsg.ConsumerGroupHeartbeatResponse](t, s, hb)
	code(t, "heartbeat", resp.ErrorCode, nil)
	t2 := s.topics.Get("t2")
	if resp.Assignment == nil || len(resp.Assignment.Topics) != 1 || resp.Assignment.Topics[0].TopicID != t2.ID || len(resp.Assignment.Topics[0].Partitions) != 2 {
		t.Fatalf("assignment %+v, want t2's 2 partitions only", resp.Assignment)
	}
}
