package interop_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
)

const anonymous = "User:ANONYMOUS"

// literal is kadm's builder with the LITERAL pattern (kadm has no default).
func literal() *kadm.ACLBuilder { return kadm.NewACLs().ResourcePatternType(kadm.ACLPatternLiteral) }

// mustCreateACLs creates b's bindings and fails on any error.
func mustCreateACLs(t *testing.T, ctx context.Context, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create acl %s %s %s: %v (%s)", r.Principal, r.Type, r.Name, r.Err, r.ErrMessage)
		}
	}
}

// TestACLEnforcement: with --authorizer acl, no super users and
// allow.everyone.if.no.acl.found=false, every client is User:ANONYMOUS
// (no SASL yet) and gets Kafka's errors where its ACLs say no: a producer
// without WRITE gets TOPIC_AUTHORIZATION_FAILED, a consumer without READ on
// its group GROUP_AUTHORIZATION_FAILED, a transactional producer without
// its transactional id's ACL TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
// Metadata hides what it may not describe. The ACLs were created (with
// kadm, as a super user) before a restart: they are persisted.
func TestACLEnforcement(t *testing.T) {
	metrics := fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t))
	b := brokertest.Start(t, "--authorizer", "acl", "--super-users", anonymous, "--metrics-listen", metrics)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// As a super user: topics and the bindings.
	setup, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(setup)
	for _, name := range []string{"open-orders", "secret", "hidden"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	mustCreateACLs(t, ctx, adm, literal().Clusters().Allow(anonymous).Operations(kadm.OpAlter, kadm.OpDescribe))
	mustCreateACLs(t, ctx, adm, kadm.NewACLs().Topics("open").ResourcePatternType(kadm.ACLPatternPrefixed).Allow(anonymous).Operations(kadm.OpRead, kadm.OpWrite))
	mustCreateACLs(t, ctx, adm, literal().Topics("secret").Allow(anonymous).Operations(kadm.OpDescribe))
	mustCreateACLs(t, ctx, adm, literal().Topics("secret").Deny("User:*").Operations(kadm.OpWrite))
	mustCreateACLs(t, ctx, adm, literal().Groups("good-group").Allow(anonymous).Operations(kadm.OpRead))
	mustCreateACLs(t, ctx, adm, literal().Groups("bad-group").Deny(anonymous).Operations(kadm.OpRead))
	mustCreateACLs(t, ctx, adm, literal().TransactionalIDs("good-tx").Allow(anonymous).Operations(kadm.OpWrite))
	setup.Close()

	// Restart without super users: the bindings were kept.
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b.Args = []string{"--authorizer", "acl", "--metrics-listen", metrics}
	b.Restart()

	kc, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordRetries(3), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm = kadm.NewClient(kc)
	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType, dreq.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	described, err := dreq.RequestWith(ctx, kc)
	if err != nil || described.ErrorCode != 0 {
		t.Fatalf("describe acls after restart: %v %+v", err, described)
	}
	n := 0
	for _, r := range described.Resources {
		n += len(r.ACLs)
	}
	if n != 9 {
		t.Fatalf("%d bindings after the restart, want 9: %+v", n, described.Resources)
	}

	// Metadata lists what ANONYMOUS may describe: not "hidden".
	listed, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !listed.Has("open-orders") || !listed.Has("secret") || listed.Has("hidden") {
		t.Fatalf("listed topics %v, want open-orders and secret only", listed.Names())
	}

	// Produce: allowed by the prefix, refused by the DENY.
	if err := kc.ProduceSync(ctx, &kgo.Record{Topic: "open-orders", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce to open-orders: %v", err)
	}
	if err := kc.ProduceSync(ctx, &kgo.Record{Topic: "secret", Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to secret: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// Consumer groups: good-group reads the record, bad-group is refused.
	consume := func(group string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics("open-orders"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			fs := cl.PollFetches(pctx)
			pcancel()
			for _, fe := range fs.Errors() {
				if !errors.Is(fe.Err, context.DeadlineExceeded) {
					return fe.Err
				}
			}
			if fs.NumRecords() > 0 {
				return nil
			}
		}
		return fmt.Errorf("group %s: no record and no error within 30s", group)
	}
	if err := consume("good-group"); err != nil {
		t.Fatalf("good-group: %v", err)
	}
	if err := consume("bad-group"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("bad-group: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}

	// Transactions: good-tx commits, bad-tx is refused.
	transact := func(id string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.TransactionalID(id), kgo.RecordRetries(3))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "open-orders", Value: []byte(id)}).FirstErr(); err != nil {
			_ = cl.EndTransaction(ctx, kgo.TryAbort)
			return err
		}
		return cl.EndTransaction(ctx, kgo.TryCommit)
	}
	if err := transact("good-tx"); err != nil {
		t.Fatalf("good-tx: %v", err)
	}
	if err := transact("bad-tx"); !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("bad-tx: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}

	// ACLs changed at runtime take effect at once: drop the DENY.
	if _, err := adm.DeleteACLs(ctx, literal().Topics("secret").Deny("User:*").DenyHosts().Operations(kadm.OpWrite)); err != nil {
		t.Fatal(err)
	}
	mustCreateACLs(t, ctx, adm, literal().Topics("secret").Allow(anonymous).Operations(kadm.OpWrite))
	if err := kc.ProduceSync(ctx, &kgo.Record{Topic: "secret", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce to secret once allowed: %v", err)
	}

	// Every denial was counted.
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`regent_acl_denials_total{operation="WRITE",otel_scope_name`,
		`resource_type="TOPIC"`, `resource_type="GROUP"`, `resource_type="TRANSACTIONAL_ID"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		for _, line := range strings.Split(string(body), "\n") {
			if strings.Contains(line, "acl") {
				t.Log(line)
			}
		}
	}
}

// TestACLKafkaAclsTool: Kafka's own kafka-acls (AclCommand, 4.3) adds,
// lists and removes bindings on Regent, LITERAL and PREFIXED, for topics,
// groups, the cluster and transactional ids.
func TestACLKafkaAclsTool(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t, "--authorizer", "acl", "--super-users", anonymous)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const acl = "org.apache.kafka.tools.AclCommand"
	server := []string{"--bootstrap-server", b.Addr}
	run := func(args ...string) string { return kafkaTool(t, ctx, lib, acl, append(server, args...)...) }

	run("--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe", "--topic", "orders", "--group", "billing")
	run("--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9", "--operation", "All", "--topic", "pay-", "--resource-pattern-type", "prefixed")
	run("--add", "--allow-principal", "User:ops", "--operation", "Alter", "--cluster")
	run("--add", "--allow-principal", "User:alice", "--operation", "Write", "--transactional-id", "tx-1")

	out := run("--list")
	for _, want := range []string{
		"name=orders, patternType=LITERAL", "name=billing, patternType=LITERAL",
		"name=pay-, patternType=PREFIXED", "name=kafka-cluster, patternType=LITERAL", "name=tx-1, patternType=LITERAL",
		"principal=User:alice, host=*, operation=READ, permissionType=ALLOW",
		"principal=User:mallory, host=10.0.0.9, operation=ALL, permissionType=DENY",
		"principal=User:ops, host=*, operation=ALTER, permissionType=ALLOW",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("kafka-acls --list lacks %q:\n%s", want, out)
		}
	}
	// --list with a topic lists what applies to it, prefixes included.
	if out := run("--list", "--topic", "pay-in", "--resource-pattern-type", "match"); !strings.Contains(out, "name=pay-, patternType=PREFIXED") || strings.Contains(out, "orders") {
		t.Fatalf("kafka-acls --list --topic pay-in --resource-pattern-type match:\n%s", out)
	}
	if out := run("--list", "--principal", "User:ops"); !strings.Contains(out, "kafka-cluster") || strings.Contains(out, "orders") {
		t.Fatalf("kafka-acls --list --principal User:ops:\n%s", out)
	}

	run("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe", "--topic", "orders", "--group", "billing")
	out = run("--list")
	if strings.Contains(out, "name=orders") || strings.Contains(out, "name=billing") || !strings.Contains(out, "name=pay-") {
		t.Fatalf("after --remove:\n%s", out)
	}
	run("--remove", "--force", "--topic", "pay-", "--resource-pattern-type", "prefixed")
	run("--remove", "--force", "--cluster")
	run("--remove", "--force", "--transactional-id", "tx-1")
	if out := run("--list"); strings.Contains(out, "patternType") {
		t.Fatalf("bindings left after removing them all:\n%s", out)
	}
}

// TestACLJavaClient: Kafka's Java client (4.3) under --authorizer acl gets
// Kafka's exceptions: TopicAuthorizationException for a producer without
// WRITE, GroupAuthorizationException for a consumer without READ on its
// group, TransactionalIdAuthorizationException for a transactional
// producer without its id's ACL; its Admin lists only describable topics.
func TestACLJavaClient(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t, "--authorizer", "acl", "--super-users", anonymous)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	setup, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(setup)
	for _, name := range []string{"java-open", "java-secret", "java-hidden"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	mustCreateACLs(t, ctx, adm, literal().Topics("java-open").Allow(anonymous).Operations(kadm.OpRead, kadm.OpWrite))
	mustCreateACLs(t, ctx, adm, literal().Topics("java-secret").Allow(anonymous).Operations(kadm.OpDescribe))
	setup.Close()
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b.Args = []string{"--authorizer", "acl"}
	b.Restart()

	src, _ := filepath.Abs(filepath.Join("javaclients", "AclProbe.java"))
	log4j, _ := filepath.Abs(filepath.Join("..", "bench", "log4j2.properties"))
	out, err := exec.CommandContext(ctx, "java", "-Xmx256m", "-Dlog4j2.configurationFile="+log4j, "-cp", filepath.Join(lib, "*"), src,
		b.Addr, "java-open", "java-secret", "java-group", "java-tx").Output()
	if err != nil {
		t.Fatalf("AclProbe: %v\n%s", err, out)
	}
	for _, want := range []string{
		"produce ok",
		"produce-denied TopicAuthorizationException",
		"consume-denied GroupAuthorizationException",
		"txn-denied TransactionalIdAuthorizationException",
		"admin-list java-open,java-secret\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("AclProbe output lacks %q:\n%s", want, out)
		}
	}
}
