package interop_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// Any node answers as Kafka's brokers do (issue 16): clients bootstrapped
// at a follower of a 3-node cluster create topics (explicitly and by
// producing), alter configs and the rest, the follower forwarding each
// change to the leader (protocol/forward.go).

// TestClusterForwardFollowerAnswers: kcat and the Java producer
// (Kafka's ConsoleProducer) bootstrapped at a follower only auto-create a
// topic each and write to it; kafka-topics --create and kafka-configs
// --alter with --bootstrap-server at the follower succeed; every other
// forwarded API sent to the follower itself answers as the leader did.
func TestClusterForwardFollowerAnswers(t *testing.T) {
	skipClusterInShort(t)
	kcat := needTool(t, "kcat")
	lib := kafkaLib(t)
	c := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	leader := c.LeaderID(t)
	f := followerOf(c, leader)
	fAddr := c.Node(f).Addr
	t.Logf("leader %d, follower %d at %s", leader, f, fAddr)
	step := time.Now()

	// kcat: produce to a topic that does not exist, through the follower.
	want := lines("kcat", 300)
	prod := exec.CommandContext(ctx, kcat, "-b", fAddr, "-t", "fwd-kcat", "-P")
	prod.Stdin = strings.NewReader(strings.Join(want, "\n") + "\n")
	if out, err := prod.CombinedOutput(); err != nil || notController(out) {
		t.Fatalf("kcat produce through follower %d: %v\n%s", f, err, out)
	}
	out, err := exec.CommandContext(ctx, kcat, "-b", fAddr, "-t", "fwd-kcat", "-C", "-o", "beginning", "-e", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat consume: %v\n%s", err, out)
	}
	sameLines(t, "kcat", want, strings.Split(strings.TrimSpace(string(out)), "\n"))
	t.Logf("kcat: %d lines auto-created, written and read back through follower %d (%v)", len(want), f, since(&step))

	// The Java producer (Kafka's console producer), bootstrapped likewise.
	want = lines("java", 300)
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-cp", lib+"/*", "-Dlog4j2.configurationFile=../bench/log4j2.properties",
		"org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", fAddr, "--topic", "fwd-java")
	cmd.Stdin = strings.NewReader(strings.Join(want, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil || notController(out) {
		t.Fatalf("Java console producer through follower %d: %v\n%s", f, err, out)
	}
	sameLines(t, "java", want, consumeValues(t, ctx, fAddr, "fwd-java", len(want)))
	t.Logf("Java producer: %d records auto-created and written through follower %d (%v)", len(want), f, since(&step))

	// Kafka's tools: Metadata and DescribeCluster name the follower as
	// controller, so the admin client sends its CreateTopics there too.
	const topics = "org.apache.kafka.tools.TopicCommand"
	const configs = "kafka.admin.ConfigCommand"
	kafkaTool(t, ctx, lib, topics, "--bootstrap-server", fAddr, "--create", "--topic", "fwd-tools", "--partitions", "3", "--replication-factor", "3")
	kafkaTool(t, ctx, lib, configs, "--bootstrap-server", fAddr, "--alter", "--entity-type", "topics", "--entity-name", "fwd-tools", "--add-config", "retention.ms=3600000")
	c.WaitTopic(t, "fwd-tools", 3, 3, time.Minute)
	cl := followerClient(t, fAddr)
	waitTopicConfig(t, ctx, cl, "fwd-tools", "retention.ms", "3600000")
	if out := kafkaTool(t, ctx, lib, configs, "--bootstrap-server", fAddr, "--describe", "--entity-type", "topics", "--entity-name", "fwd-tools"); !strings.Contains(out, "retention.ms=3600000") {
		t.Fatalf("kafka-configs --describe at the follower:\n%s", out)
	}

	t.Logf("kafka-topics --create, kafka-configs --alter and --describe at follower %d (%v)", f, since(&step))

	// Every forwarded API, sent to the follower itself.
	forwardedAPIs(t, ctx, c, cl, fAddr, "fwd-raw")
	t.Logf("CreateTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs, DeleteRecords, AlterUserScramCredentials, UpdateFeatures, DeleteTopics at follower %d (%v)", f, since(&step))

	// controller_mutation_rate: the leader measures the client a follower
	// forwards for, and the follower mutes that client's connection.
	if e := alterQuotas(t, ctx, cl, false, quotaEntry(quotaEntity("client-id", "fwd-admin"), quotaOp{key: "controller_mutation_rate", value: 10})).Entries[0]; e.ErrorCode != 0 {
		t.Fatalf("alter quota at the follower: %d", e.ErrorCode)
	}
	deadline := time.Now().Add(time.Minute)
	admin := dialRaw(t, fAddr, "fwd-admin")
	th, at := overMutationQuota(t, admin, "fwd-mq", deadline)
	waitedOut(t, admin, th, at, deadline)
	t.Logf("controller_mutation_rate through follower %d: third topic refused, throttle %d ms waited out (%v)", f, th, since(&step))
}

// TestClusterForwardAfterLeaderKilled: with an authorizer on, the leader
// checks the principal a follower forwards; then the leader is killed and
// admin requests sent to a surviving follower at once are answered once a
// new leader is elected (the follower waits for it, within the requests'
// timeout), Metadata meanwhile never carrying NOT_CONTROLLER on a topic.
func TestClusterForwardAfterLeaderKilled(t *testing.T) {
	skipClusterInShort(t)
	kcat := needTool(t, "kcat")
	c := brokertest.StartCluster(t, 3, "--authorizer", "acl", "--broker-config", "allow.everyone.if.no.acl.found=true")
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	first := c.LeaderID(t)
	f := followerOf(c, first)
	fAddr := c.Node(f).Addr
	cl := followerClient(t, fAddr)

	// The forwarded principal is authorized on the leader: with CREATE
	// denied on the cluster and on "locked-" topics, a CreateTopics of
	// locked-x through the follower is refused by the leader (its log
	// names the principal and host the follower forwarded), open-x is
	// created (no ACL on it: allow.everyone.if.no.acl.found).
	deny := func(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType) kmsg.CreateACLsRequestCreation {
		acl := kmsg.NewCreateACLsRequestCreation()
		acl.ResourceType, acl.ResourceName, acl.ResourcePatternType = rt, name, pt
		acl.Principal, acl.Host, acl.Operation, acl.PermissionType = "User:*", "*", kmsg.ACLOperationCreate, kmsg.ACLPermissionTypeDeny
		return acl
	}
	creq := kmsg.NewPtrCreateACLsRequest()
	creq.Creations = append(creq.Creations,
		deny(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral),
		deny(kmsg.ACLResourceTypeTopic, "locked-", kmsg.ACLResourcePatternTypePrefixed))
	cresp := followerRequest(t, ctx, cl, creq).(*kmsg.CreateACLsResponse)
	if len(cresp.Results) != 2 || cresp.Results[0].ErrorCode != 0 || cresp.Results[1].ErrorCode != 0 {
		t.Fatalf("CreateAcls through follower %d: %+v", f, cresp.Results)
	}
	testwait.For(t, "the leader to refuse locked-x", time.Minute, func() bool {
		return createTopicAt(t, ctx, cl, "locked-x", 30000) == kerr.TopicAuthorizationFailed.Code
	})
	// The node's output reaches the harness through a pipe: wait for it.
	testwait.For(t, fmt.Sprintf("leader %d to log the denial of the forwarded CreateTopics", first), 30*time.Second, func() bool {
		tail := c.Node(first).LogTail(1 << 20)
		return strings.Contains(tail, `principal=User:ANONYMOUS host=127.0.0.1 api=CreateTopics operation=CREATE resource_type=TOPIC resource=locked-x`)
	})
	if code := createTopicAt(t, ctx, cl, "open-x", 30000); code != 0 {
		t.Fatalf("CreateTopics open-x through follower %d: %v", f, kerr.ErrorForCode(code))
	}
	c.WaitTopic(t, "open-x", 1, 3, time.Minute)

	// Kill the leader; ask the follower at once.
	c.Kill(first)
	start := time.Now()
	if code := createTopicAt(t, ctx, cl, "after-kill", 30000); code != 0 {
		t.Fatalf("CreateTopics through follower %d right after the leader's kill: %v", f, kerr.ErrorForCode(code))
	}
	t.Logf("CreateTopics sent to follower %d as leader %d died: answered in %v", f, first, time.Since(start).Round(time.Millisecond))
	md := kmsg.NewPtrMetadataRequest()
	md.AllowAutoTopicCreation = true
	for _, n := range []string{"open-x", "auto-after-kill"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(n)
		md.Topics = append(md.Topics, mt)
	}
	for _, mt := range followerRequest(t, ctx, cl, md).(*kmsg.MetadataResponse).Topics {
		if mt.ErrorCode != 0 && mt.ErrorCode != kerr.LeaderNotAvailable.Code {
			t.Fatalf("Metadata of %s on follower %d during the election: %v", *mt.Topic, f, kerr.ErrorForCode(mt.ErrorCode))
		}
	}
	second := c.WaitLeader(t, time.Minute)
	if second == first {
		t.Fatalf("node %d still leads after its kill", first)
	}
	t.Logf("new leader %d", second)
	alterTopicConfig(t, ctx, cl, "after-kill", "retention.ms", "7200000")
	waitTopicConfig(t, ctx, cl, "after-kill", "retention.ms", "7200000")

	// A producer bootstrapped at the follower auto-creates under the new leader.
	want := lines("after", 100)
	prod := exec.CommandContext(ctx, kcat, "-b", fAddr, "-t", "fwd-after-kill", "-P")
	prod.Stdin = strings.NewReader(strings.Join(want, "\n") + "\n")
	if out, err := prod.CombinedOutput(); err != nil || notController(out) {
		t.Fatalf("kcat produce through follower %d after the failover: %v\n%s", f, err, out)
	}
	sameLines(t, "kcat after the failover", want, consumeValues(t, ctx, fAddr, "fwd-after-kill", len(want)))
}

// TestClusterForwardMutualTLS: with cluster links over mutual TLS the
// follower's forwards travel over them (the admin endpoint refuses a
// plaintext forward) and are answered.
func TestClusterForwardMutualTLS(t *testing.T) {
	skipClusterInShort(t)
	x := brokertest.NewTLS(t, "cluster-ca")
	c := brokertest.StartCluster(t, 3, x.ClusterArgs()...)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	leader := c.LeaderID(t)
	f := followerOf(c, leader)
	cl := followerClient(t, c.Node(f).Addr)
	if code := createTopicAt(t, ctx, cl, "mtls-fwd", 30000); code != 0 {
		t.Fatalf("CreateTopics through follower %d over mutual TLS: %v", f, kerr.ErrorForCode(code))
	}
	alterTopicConfig(t, ctx, cl, "mtls-fwd", "retention.ms", "3600000")
	waitTopicConfig(t, ctx, cl, "mtls-fwd", "retention.ms", "3600000")

	// A plaintext forward to the leader's admin endpoint never reaches
	// the handler: Go's TLS server answers it with its own refusal.
	body := strings.NewReader(`{"key":19,"version":7,"principal":"User:admin","body":""}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.Node(leader).Admin+"/kafka/forward", body)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req); err == nil {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if !strings.Contains(string(raw), "HTTP request to an HTTPS server") {
			t.Fatalf("plaintext forward to leader %d's admin endpoint answered %s: %s", leader, resp.Status, raw)
		}
	}
}

// forwardedAPIs sends CreateTopics, CreatePartitions, AlterConfigs,
// IncrementalAlterConfigs, DeleteRecords, AlterUserScramCredentials,
// UpdateFeatures and DeleteTopics to the follower at fAddr (which cl is
// seeded with), each answered without error, and checks their effect.
func forwardedAPIs(t *testing.T, ctx context.Context, c *brokertest.Cluster, cl *kgo.Client, fAddr, topic string) {
	t.Helper()
	if code := createTopicAt(t, ctx, cl, topic, 30000); code != 0 {
		t.Fatalf("CreateTopics %s: %v", topic, kerr.ErrorForCode(code))
	}
	// The follower answered once it applied the creation itself: its
	// Metadata has the topic at once.
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	if r := followerRequest(t, ctx, cl, md).(*kmsg.MetadataResponse); len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("Metadata of %s on the follower right after its CreateTopics: %+v", topic, r.Topics)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = topic, 3
	cp.Topics, cp.TimeoutMillis = append(cp.Topics, cpt), 30000
	if r := followerRequest(t, ctx, cl, cp).(*kmsg.CreatePartitionsResponse); len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreatePartitions: %+v", r.Topics)
	}
	c.WaitTopic(t, topic, 3, 3, time.Minute)

	ac := kmsg.NewPtrAlterConfigsRequest()
	acr := kmsg.NewAlterConfigsRequestResource()
	acr.ResourceType, acr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	acr.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "segment.ms", Value: kmsg.StringPtr("600000")}}
	ac.Resources = append(ac.Resources, acr)
	if r := followerRequest(t, ctx, cl, ac).(*kmsg.AlterConfigsResponse); len(r.Resources) != 1 || r.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %+v", r.Resources)
	}
	waitTopicConfig(t, ctx, cl, topic, "segment.ms", "600000")
	alterTopicConfig(t, ctx, cl, topic, "retention.ms", "5400000")
	waitTopicConfig(t, ctx, cl, topic, "retention.ms", "5400000")

	// Ten records in partition 0 (through the leader), five deleted
	// through the follower.
	pcl := c.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		if err := pcl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dr := kmsg.NewPtrDeleteRecordsRequest()
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = topic
	drt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 5}}
	dr.Topics, dr.TimeoutMillis = append(dr.Topics, drt), 30000
	r := followerRequest(t, ctx, cl, dr).(*kmsg.DeleteRecordsResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 || r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[0].Partitions[0].LowWatermark != 5 {
		t.Fatalf("DeleteRecords: %+v", r.Topics)
	}

	us := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations = "fwd-user", 1, 4096 // SCRAM-SHA-256
	up.Salt, up.SaltedPassword = bytes.Repeat([]byte{7}, 16), bytes.Repeat([]byte{9}, 32)
	us.Upsertions = append(us.Upsertions, up)
	if r := followerRequest(t, ctx, cl, us).(*kmsg.AlterUserSCRAMCredentialsResponse); len(r.Results) != 1 || r.Results[0].ErrorCode != 0 {
		t.Fatalf("AlterUserScramCredentials: %+v", r.Results)
	}
	testwait.For(t, "fwd-user's credential described by the follower", time.Minute, func() bool {
		req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		req.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "fwd-user"}}
		r := followerRequest(t, ctx, cl, req).(*kmsg.DescribeUserSCRAMCredentialsResponse)
		return len(r.Results) == 1 && r.Results[0].ErrorCode == 0 && len(r.Results[0].CredentialInfos) == 1
	})

	// UpdateFeatures: transaction.version down to 1 (a safe downgrade)
	// and back up to 2, through the follower.
	for _, u := range []struct {
		level int16
		typ   int8
	}{{1, 2}, {2, 1}} {
		if err := updateTxnVersion(ctx, fAddr, u.level, u.typ); err != nil {
			t.Fatalf("UpdateFeatures transaction.version=%d through the follower: %v", u.level, err)
		}
		testwait.For(t, fmt.Sprintf("the follower reports transaction.version %d", u.level), time.Minute, func() bool {
			l, _, ok := nodeFeatures(ctx, fAddr)
			return ok && l == u.level
		})
	}

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr(topic)}}
	dt.TopicNames, dt.TimeoutMillis = []string{topic}, 30000
	if r := followerRequest(t, ctx, cl, dt).(*kmsg.DeleteTopicsResponse); len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics: %+v", r.Topics)
	}
	testwait.For(t, topic+" gone from the follower's Metadata", time.Minute, func() bool {
		md := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		md.Topics = append(md.Topics, mt)
		r := followerRequest(t, ctx, cl, md).(*kmsg.MetadataResponse)
		return len(r.Topics) == 1 && r.Topics[0].ErrorCode == kerr.UnknownTopicOrPartition.Code
	})
}

// followerOf returns a live node other than leader.
func followerOf(c *brokertest.Cluster, leader int32) int32 {
	for _, id := range c.LiveIDs() {
		if id != leader {
			return id
		}
	}
	return -1
}

// followerClient is a kgo client seeded with addr only, closed at the end
// of the test; followerRequest sends on its seed connection, so requests
// reach that node whatever Metadata says.
func followerClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func followerRequest(t *testing.T, ctx context.Context, cl *kgo.Client, req kmsg.Request) kmsg.Response {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(rctx, req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// createTopicAt creates topic (one partition, every voter a replica) on
// cl's seed node and returns the topic's error code.
func createTopicAt(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, timeoutMs int32) int16 {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, -1
	req.Topics, req.TimeoutMillis = append(req.Topics, rt), timeoutMs
	resp := followerRequest(t, ctx, cl, req).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 {
		t.Fatalf("CreateTopics %s: %d topics answered", topic, len(resp.Topics))
	}
	return resp.Topics[0].ErrorCode
}

// alterTopicConfig sets one topic config on cl's seed node.
func alterTopicConfig(t *testing.T, ctx context.Context, cl *kgo.Client, topic, key, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	rr.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: key, Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr(value)}}
	req.Resources = append(req.Resources, rr)
	resp := followerRequest(t, ctx, cl, req).(*kmsg.IncrementalAlterConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs %s %s=%s: %+v", topic, key, value, resp.Resources)
	}
}

// waitTopicConfig waits until cl's seed node describes topic's key as value.
func waitTopicConfig(t *testing.T, ctx context.Context, cl *kgo.Client, topic, key, value string) {
	t.Helper()
	testwait.For(t, fmt.Sprintf("%s %s=%s described by the follower", topic, key, value), time.Minute, func() bool {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{key}
		req.Resources = append(req.Resources, rr)
		resp := followerRequest(t, ctx, cl, req).(*kmsg.DescribeConfigsResponse)
		for _, r := range resp.Resources {
			for _, c := range r.Configs {
				if c.Name == key && c.Value != nil && *c.Value == value {
					return true
				}
			}
		}
		return false
	})
}

// consumeValues reads n record values of topic from the start, through a
// client bootstrapped at addr.
func consumeValues(t *testing.T, ctx context.Context, addr, topic string, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for len(got) < n {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("%s: read %d of %d records: %v", topic, len(got), n, rctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// since returns the time since *start and restarts it.
func since(start *time.Time) time.Duration {
	now := time.Now()
	d := now.Sub(*start).Round(time.Millisecond)
	*start = now
	return d
}

func lines(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

// sameLines compares as multisets: records of several partitions come
// back interleaved.
func sameLines(t *testing.T, what string, want, got []string) {
	t.Helper()
	w, g := slices.Clone(want), slices.Clone(got)
	slices.Sort(w)
	slices.Sort(g)
	if !slices.Equal(w, g) {
		t.Fatalf("%s: read %d records, wrote %d (or different ones); first read %q", what, len(g), len(w), g[:min(len(g), 5)])
	}
}

// notController reports a client's output naming Kafka's NOT_CONTROLLER.
func notController(out []byte) bool {
	return bytes.Contains(out, []byte("NOT_CONTROLLER")) || bytes.Contains(bytes.ToLower(out), []byte("not controller"))
}
