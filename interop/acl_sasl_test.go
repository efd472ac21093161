package interop_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/regent-broker/regent/interop/brokertest"
)

// aclSASLBroker starts a broker with a PLAINTEXT and a SASL_PLAINTEXT
// listener and the ACL authorizer, whose super user admin (SCRAM-SHA-512,
// password adminPW) was added offline with regent users add; extra flags
// are appended.
func aclSASLBroker(t *testing.T, adminPW string, extra ...string) (plainAddr, saslAddr string) {
	t.Helper()
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte(adminPW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(brokertest.Binary(t), "users", "add", "admin", "--mechanism", "SCRAM-SHA-512", "--password-file", pw, "--data", data).CombinedOutput(); err != nil {
		t.Fatalf("regent users add: %v\n%s", err, out)
	}
	plainAddr, saslAddr = loopback(t), loopback(t)
	brokertest.StartIn(t, data, plainAddr, append([]string{"--listeners", "PLAINTEXT://" + plainAddr + ",SASL_PLAINTEXT://" + saslAddr,
		"--authorizer", "acl", "--super-users", "User:admin"}, extra...)...)
	return plainAddr, saslAddr
}

// TestACLWithSASLPrincipals: the authorizer sees SASL's principals. An
// admin made offline is the super user; alice (made by the admin with
// AlterUserScramCredentials) may use her prefix of topics and her group;
// bob, who may read his topic but has no ACL on his group, is refused
// the group; an anonymous PLAINTEXT client sees no
// topic and cannot change ACLs.
func TestACLWithSASLPrincipals(t *testing.T) {
	plainAddr, saslAddr := aclSASLBroker(t, "admin-secret")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	as := func(user, pass string, opts ...kgo.Opt) *kgo.Client {
		m := scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
		return newClient(t, append([]kgo.Opt{kgo.SeedBrokers(saslAddr), kgo.SASL(m), kgo.RecordRetries(3)}, opts...)...)
	}
	admin := kadm.NewClient(as("admin", "admin-secret"))
	for _, name := range []string{"alice-orders", "bob-orders"} {
		if _, err := admin.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-pw"},
	})
	if err != nil || res["alice"].Err != nil || res["bob"].Err != nil {
		t.Fatalf("users: %v %+v", err, res)
	}
	mustCreateACLs(t, ctx, admin, kadm.NewACLs().ResourcePatternType(kadm.ACLPatternPrefixed).Topics("alice-").Allow("User:alice").Operations(kadm.OpRead, kadm.OpWrite))
	mustCreateACLs(t, ctx, admin, literal().Groups("alice-group").Allow("User:alice").Operations(kadm.OpRead))
	mustCreateACLs(t, ctx, admin, literal().Topics("bob-orders").Allow("User:bob").Operations(kadm.OpRead))

	alice := as("alice", "alice-pw", kgo.ConsumerGroup("alice-group"), kgo.ConsumeTopics("alice-orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "alice-orders", Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatalf("alice produces to alice-orders: %v", err)
	}
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "bob-orders", Value: []byte("a")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces to bob-orders: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if listed, err := kadm.NewClient(alice).ListTopics(ctx); err != nil || !listed.Has("alice-orders") || listed.Has("bob-orders") {
		t.Fatalf("alice's topics: %v %v, want alice-orders only", listed.Names(), err)
	}
	for got := 0; got == 0; {
		fs := alice.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("alice consumed nothing")
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("alice consumes: %v", err) })
		got = fs.NumRecords()
	}

	bob := as("bob", "bob-pw", kgo.ConsumerGroup("bob-group"), kgo.ConsumeTopics("bob-orders"))
	var bobErr error
	for bobErr == nil {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		fs := bob.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatal("bob's group was neither served nor refused")
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				bobErr = fe.Err
			}
		}
	}
	if !errors.Is(bobErr, kerr.GroupAuthorizationFailed) {
		t.Fatalf("bob's group: %v, want GROUP_AUTHORIZATION_FAILED", bobErr)
	}

	anon := kadm.NewClient(newClient(t, kgo.SeedBrokers(plainAddr)))
	if listed, err := anon.ListTopics(ctx); err != nil || len(listed) != 0 {
		t.Fatalf("anonymous sees topics %v (%v), want none", listed.Names(), err)
	}
	cres, err := anon.CreateACLs(ctx, literal().Topics("bob-orders").Allow("User:ANONYMOUS").Operations(kadm.OpRead))
	if err == nil && (len(cres) != 1 || !errors.Is(cres[0].Err, kerr.ClusterAuthorizationFailed)) {
		t.Fatalf("anonymous CreateAcls: %+v, want CLUSTER_AUTHORIZATION_FAILED", cres)
	}
}
