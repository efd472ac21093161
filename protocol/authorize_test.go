package protocol

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

// denialCounter is a DenialObserver that counts.
type denialCounter struct {
	mu sync.Mutex
	n  map[string]int // "OPERATION/RESOURCE_TYPE"
}

func (d *denialCounter) ACLDenied(_ context.Context, op, rt string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[op+"/"+rt]++
}

func (d *denialCounter) count(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[key]
}

// aclServer is groupServer with an authorizer (no super users; the
// allow-everyone switch is allowAll) and the counting observer. Requests
// made with call come from User:ANONYMOUS at 10.1.2.3.
func aclServer(t *testing.T, allowAll *atomic.Bool) (*Server, *acls.Store, *denialCounter) {
	t.Helper()
	s := groupServer(t)
	store, err := acls.Open(acls.Options{DataDir: t.TempDir(), Logger: s.log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	obs := &denialCounter{}
	s.SetAuthorizer(acls.NewAuthorizer(store, nil, allowAll.Load), obs)
	return s, store, obs
}

func anon(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) acls.ACL {
	return acls.ACL{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: AnonymousPrincipal, Host: "*", Operation: op, Permission: perm}
}

func metadataTopics(t *testing.T, s *Server, names ...string) []kmsg.MetadataResponseTopic {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	if names == nil {
		req.Topics = nil
	} else {
		for _, n := range names {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
	}
	return call[*kmsg.MetadataResponse](t, s, req).Topics
}

func TestACLAPIsWithoutAuthorizer(t *testing.T) {
	s := groupServer(t)
	req := kmsg.NewPtrCreateACLsRequest()
	req.Version = 3
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = acls.Topic, "t", acls.Literal
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:a", "*", acls.Read, acls.Allow
	req.Creations = append(req.Creations, c)
	resp := call[*kmsg.CreateACLsResponse](t, s, req)
	if len(resp.Results) != 1 || resp.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("CreateAcls without an authorizer: %+v, want SECURITY_DISABLED", resp.Results)
	}
	// And everything else is served as before.
	if got := metadataTopics(t, s); len(got) != 3 {
		t.Fatalf("metadata without an authorizer: %d topics, want 3 (t and the two internal topics)", len(got))
	}
}

func TestAuthorizationDenied(t *testing.T) {
	var allowAll atomic.Bool
	s, _, obs := aclServer(t, &allowAll)

	if got := metadataTopics(t, s); len(got) != 0 {
		t.Fatalf("all-topics metadata shows %d topics the principal may not describe", len(got))
	}
	if got := metadataTopics(t, s, "t"); len(got) != 1 || got[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("named metadata: %+v, want TOPIC_AUTHORIZATION_FAILED", got)
	}
	if obs.count("DESCRIBE/TOPIC") != 1 {
		t.Fatalf("denials counted %v, want one DESCRIBE/TOPIC (the listing is filtered silently)", obs.n)
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType = 5, "g", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if resp := call[*kmsg.JoinGroupResponse](t, s, join); resp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("JoinGroup: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.ErrorCode))
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 4, 1, []string{"tx"}
	if resp := call[*kmsg.FindCoordinatorResponse](t, s, fc); resp.Coordinators[0].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("FindCoordinator(txn): %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.Coordinators[0].ErrorCode))
	}

	ipid := kmsg.NewPtrInitProducerIDRequest()
	ipid.Version = 4
	if resp := call[*kmsg.InitProducerIDResponse](t, s, ipid); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("idempotent InitProducerId: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.ErrorCode))
	}
	ipid.TransactionalID = kmsg.StringPtr("tx")
	if resp := call[*kmsg.InitProducerIDResponse](t, s, ipid); resp.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional InitProducerId: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.ErrorCode))
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 7
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "t"
	lt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1}}
	lo.Topics = append(lo.Topics, lt)
	if resp := call[*kmsg.ListOffsetsResponse](t, s, lo); resp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("ListOffsets: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}

	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 7
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "new", 1, 1
	ct.Topics = append(ct.Topics, ctt)
	if resp := call[*kmsg.CreateTopicsResponse](t, s, ct); resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("CreateTopics: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 4
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"}}
	if resp := call[*kmsg.DescribeConfigsResponse](t, s, dc); resp.Resources[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("DescribeConfigs(broker): %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.Resources[0].ErrorCode))
	}

	da := kmsg.NewPtrDescribeACLsRequest()
	da.Version, da.ResourceType, da.ResourcePatternType = 3, kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	da.Operation, da.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if resp := call[*kmsg.DescribeACLsResponse](t, s, da); resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("DescribeAcls: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.ErrorCode))
	}

	// allow.everyone.if.no.acl.found opens what no ACL names.
	allowAll.Store(true)
	if got := metadataTopics(t, s); len(got) != 3 {
		t.Fatalf("with allow.everyone.if.no.acl.found, all-topics metadata shows %d topics, want 3 (t and the two internal topics)", len(got))
	}
}

// TestACLRoundTrip: ACLs created, described and deleted through the
// protocol take effect on the next request.
func TestACLRoundTrip(t *testing.T) {
	var allowAll atomic.Bool
	s, store, _ := aclServer(t, &allowAll)
	// The operator's grant: ANONYMOUS may manage ACLs.
	if err := store.Create([]acls.ACL{anon(acls.Cluster, acls.Literal, acls.ClusterName, acls.Alter, acls.Allow)}); err != nil {
		t.Fatal(err)
	}

	create := kmsg.NewPtrCreateACLsRequest()
	create.Version = 3
	for _, a := range []acls.ACL{
		anon(acls.Topic, acls.Prefixed, "t", acls.Read, acls.Allow),
		anon(acls.Group, acls.Literal, "g", acls.Read, acls.Deny),
		{ResourceType: acls.Topic, ResourceName: "x", PatternType: kmsg.ACLResourcePatternTypeMatch, Principal: "User:a", Host: "*", Operation: acls.Read, Permission: acls.Allow},
	} {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
		c.Principal, c.Host, c.Operation, c.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
		create.Creations = append(create.Creations, c)
	}
	cr := call[*kmsg.CreateACLsResponse](t, s, create)
	if len(cr.Results) != 3 || cr.Results[0].ErrorCode != 0 || cr.Results[1].ErrorCode != 0 || cr.Results[2].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("CreateAcls results %+v, want ok, ok, INVALID_REQUEST (MATCH cannot be created)", cr.Results)
	}
	if got := metadataTopics(t, s); len(got) != 1 {
		t.Fatalf("READ on prefix t implies DESCRIBE on t: metadata shows %d topics, want 1", len(got))
	}

	// ALTER on the cluster implies DESCRIBE: DescribeAcls is allowed.
	da := kmsg.NewPtrDescribeACLsRequest()
	da.Version, da.ResourceType, da.ResourcePatternType = 3, acls.Topic, kmsg.ACLResourcePatternTypeMatch
	da.ResourceName = kmsg.StringPtr("t-1")
	da.Operation, da.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dr := call[*kmsg.DescribeACLsResponse](t, s, da)
	if dr.ErrorCode != 0 || len(dr.Resources) != 1 || dr.Resources[0].ResourceName != "t" || dr.Resources[0].ResourcePatternType != acls.Prefixed || len(dr.Resources[0].ACLs) != 1 {
		t.Fatalf("DescribeAcls MATCH t-1: %+v", dr)
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	del.Version = 3
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = acls.Topic, kmsg.ACLResourcePatternTypeAny
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	delr := call[*kmsg.DeleteACLsResponse](t, s, del)
	if len(delr.Results) != 1 || delr.Results[0].ErrorCode != 0 || len(delr.Results[0].MatchingACLs) != 1 || delr.Results[0].MatchingACLs[0].ResourceName != "t" {
		t.Fatalf("DeleteAcls: %+v", delr.Results)
	}
	if got := metadataTopics(t, s); len(got) != 0 {
		t.Fatalf("after the delete, metadata shows %d topics, want 0", len(got))
	}
	if n := store.Set().Len(); n != 2 {
		t.Fatalf("%d bindings left, want 2 (cluster ALTER and group DENY)", n)
	}
}

func TestProduceFetchAuthorization(t *testing.T) {
	var allowAll atomic.Bool
	s, store, obs := aclServer(t, &allowAll)

	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks, produce.TimeoutMillis = 9, 1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0}}
	produce.Topics = append(produce.Topics, pt)
	if resp := call[*kmsg.ProduceResponse](t, s, produce); resp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("Produce: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	produce.TransactionID = kmsg.StringPtr("tx")
	if resp := call[*kmsg.ProduceResponse](t, s, produce); resp.Topics[0].Partitions[0].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional Produce: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	if obs.count("WRITE/TOPIC") != 1 || obs.count("WRITE/TRANSACTIONAL_ID") != 1 {
		t.Fatalf("denials counted %v", obs.n)
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.MaxWaitMillis, fetch.SessionEpoch = 12, 0, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes = 0, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	if resp := call[*kmsg.FetchResponse](t, s, fetch); resp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("Fetch: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}

	// READ allows the fetch (and implies DESCRIBE), not the produce.
	if err := store.Create([]acls.ACL{anon(acls.Topic, acls.Literal, "t", acls.Read, acls.Allow)}); err != nil {
		t.Fatal(err)
	}
	if resp := call[*kmsg.FetchResponse](t, s, fetch); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("Fetch with READ: %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	produce.TransactionID = nil
	if resp := call[*kmsg.ProduceResponse](t, s, produce); resp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("Produce with READ only: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
}

func TestMetadataAuthorizedOperations(t *testing.T) {
	var allowAll atomic.Bool
	s, store, _ := aclServer(t, &allowAll)
	if err := store.Create([]acls.ACL{
		anon(acls.Topic, acls.Literal, "t", acls.Read, acls.Allow),
		anon(acls.Topic, acls.Literal, "t", acls.AlterConfigs, acls.Allow),
		anon(acls.Cluster, acls.Literal, acls.ClusterName, acls.Create, acls.Allow),
	}); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.IncludeTopicAuthorizedOperations, req.IncludeClusterAuthorizedOperations = 10, true, true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("t")
	req.Topics = append(req.Topics, rt)
	resp := call[*kmsg.MetadataResponse](t, s, req)
	// READ (3) implies DESCRIBE (8); ALTER_CONFIGS (11) implies DESCRIBE_CONFIGS (10).
	if want := int32(1<<3 | 1<<8 | 1<<10 | 1<<11); len(resp.Topics) != 1 || resp.Topics[0].AuthorizedOperations != want {
		t.Fatalf("topic authorized operations %b, want %b", resp.Topics[0].AuthorizedOperations, want)
	}
	if want := int32(1 << 5); resp.AuthorizedOperations != want {
		t.Fatalf("cluster authorized operations %b, want %b", resp.AuthorizedOperations, want)
	}
}

// TestEveryServedKeyIsAuthorized: each served API key is listed with the
// check its handler makes (see the handler files), or as needing none; a
// new key fails here until its authorization is decided.
func TestEveryServedKeyIsAuthorized(t *testing.T) {
	checked := map[int16]string{
		0: "WRITE topic, WRITE transactional id", 1: "READ topic", 2: "DESCRIBE topic", 3: "DESCRIBE topic, CREATE cluster/topic",
		8: "READ group, READ topic", 9: "DESCRIBE group, DESCRIBE topic", 10: "DESCRIBE group / transactional id",
		11: "READ group", 12: "READ group", 13: "READ group", 14: "READ group", 15: "DESCRIBE group", 16: "DESCRIBE cluster or group",
		19: "CREATE cluster or topic", 20: "DELETE topic", 21: "DELETE topic",
		22: "WRITE transactional id; IDEMPOTENT_WRITE cluster or WRITE some topic", 23: "DESCRIBE topic",
		24: "WRITE transactional id, WRITE topic", 25: "WRITE transactional id, READ group", 26: "WRITE transactional id", 27: "CLUSTER_ACTION cluster",
		28: "WRITE transactional id, READ group, READ topic", 29: "DESCRIBE cluster", 30: "ALTER cluster", 31: "ALTER cluster",
		32: "DESCRIBE_CONFIGS topic/cluster", 33: "ALTER_CONFIGS topic/cluster", 34: "ALTER cluster", 35: "DESCRIBE cluster", 37: "ALTER topic",
		38: "SASL-authenticated, not by a token; CREATE_TOKENS user for another owner", 39: "SASL, not a token; owner, requester or renewer",
		40: "SASL, not a token; owner, requester or renewer", 41: "SASL, not a token; own tokens, DESCRIBE token or DESCRIBE_TOKENS user",
		42: "DELETE group", 43: "ALTER cluster", 45: "ALTER cluster", 46: "DESCRIBE cluster", 44: "ALTER_CONFIGS topic/cluster", 47: "DELETE group, READ topic", 48: "DESCRIBE_CONFIGS cluster", 49: "ALTER_CONFIGS cluster",
		50: "DESCRIBE cluster", 51: "ALTER cluster", 55: "DESCRIBE cluster", 57: "ALTER cluster", 60: "none (DESCRIBE cluster only for authorized operations, as Kafka)",
		61: "READ topic", 65: "DESCRIBE transactional id", 66: "DESCRIBE transactional id (filter)",
		68: "READ group, DESCRIBE topics", 69: "DESCRIBE group", 74: "DESCRIBE_CONFIGS cluster", 75: "DESCRIBE topic",
		71: "none (any client, as Kafka)", 72: "none (any client, as Kafka)",
		76: "READ group, DESCRIBE topics", 77: "DESCRIBE group", 88: "READ group, DESCRIBE topics, CREATE internal topics", 89: "DESCRIBE group",
		78: "READ group, READ topic", 79: "READ group, READ topic", 90: "DESCRIBE group, DESCRIBE topic",
		91: "READ group, READ topic", 92: "DELETE group, READ topic",
	}
	exempt := map[int16]bool{17: true, 18: true, 36: true} // SaslHandshake, ApiVersions, SaslAuthenticate
	for _, k := range ServedKeys() {
		if checked[k] == "" && !exempt[k] {
			t.Errorf("%s (key %d) is served but its authorization is not listed here", kmsg.NameForKey(k), k)
		}
	}
}
