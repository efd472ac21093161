package interop_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// tokenBroker is saslBroker with delegation tokens on, and users alice,
// bob and carol (SCRAM-SHA-512, password NAME-pw).
func tokenBroker(t *testing.T, ctx context.Context) (plainAddr, saslAddr string) {
	t.Helper()
	_, plainAddr, saslAddr = saslBroker(t, "--broker-config", "delegation.token.secret.key=interop-token-secret")
	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(plainAddr)))
	var ups []kadm.UpsertSCRAM
	for _, u := range []string{"alice", "bob", "carol"} {
		ups = append(ups, kadm.UpsertSCRAM{User: u, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: u + "-pw"})
	}
	res, err := adm.AlterUserSCRAMs(ctx, nil, ups)
	if err != nil {
		t.Fatal(err)
	}
	for u, r := range res {
		if r.Err != nil {
			t.Fatalf("create %s: %v", u, r.Err)
		}
	}
	return plainAddr, saslAddr
}

func userAdmin(t *testing.T, saslAddr, user string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, kgo.SeedBrokers(saslAddr), kgo.SASL(scram.Auth{User: user, Pass: user + "-pw"}.AsSha512Mechanism())))
}

// tokenAuth is a client's SCRAM mechanism for a delegation token.
func tokenAuth(tok kadm.DelegationToken) scram.Auth {
	return scram.Auth{User: tok.TokenID, Pass: base64.StdEncoding.EncodeToString(tok.HMAC), IsToken: true}
}

// TestDelegationTokens: franz-go's admin client creates, describes,
// renews and expires delegation tokens (KIP-48) over SASL, and a client
// authenticated with a token produces and consumes as the token's owner
// (SCRAM with tokenauth=true), with Kafka's refusals: no token requests
// on a plaintext connection or from a token-authenticated one, only the
// owner, requester or a renewer renews, an expired token authenticates no
// more, and tokens are off without delegation.token.secret.key.
func TestDelegationTokens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plainAddr, saslAddr := tokenBroker(t, ctx)
	if _, err := kadm.NewClient(newClient(t, kgo.SeedBrokers(plainAddr))).CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Fatalf("create on a plaintext connection: %v", err)
	}
	alice := userAdmin(t, saslAddr, "alice")
	before := time.Now()
	tok, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Renewers: []kadm.Principal{{Type: "User", Name: "bob"}}, MaxLifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Owner.Name != "alice" || tok.TokenID == "" || len(tok.HMAC) != 64 ||
		tok.IssueTimestamp.Before(before.Add(-time.Second)) || tok.MaxTimestamp.Sub(tok.IssueTimestamp) != time.Hour ||
		tok.ExpiryTimestamp != tok.MaxTimestamp { // the default renew period (a day) is past the hour
		t.Fatalf("token: %+v", tok)
	}
	if _, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Renewers: []kadm.Principal{{Type: "Group", Name: "x"}}}); !errors.Is(err, kerr.InvalidPrincipalType) {
		t.Fatalf("a Group renewer: %v", err)
	}

	// The token authenticates as alice: produce and consume.
	if _, err := alice.CreateTopic(ctx, 1, 1, nil, "token-topic"); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, ctx, "token-topic", "tok", kgo.SeedBrokers(saslAddr), kgo.SASL(tokenAuth(tok).AsSha512Mechanism()))
	roundTrip(t, ctx, "token-topic", "tok256", kgo.SeedBrokers(saslAddr), kgo.SASL(tokenAuth(tok).AsSha256Mechanism()))
	tokAdm := kadm.NewClient(newClient(t, kgo.SeedBrokers(saslAddr), kgo.SASL(tokenAuth(tok).AsSha512Mechanism())))
	if _, err := tokAdm.CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Fatalf("create from a token-authenticated connection: %v", err)
	}
	bad := tokenAuth(tok)
	bad.Pass = base64.StdEncoding.EncodeToString([]byte("not the hmac"))
	if err := pingErr(t, saslAddr, bad.AsSha512Mechanism()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong HMAC: %v", err)
	}
	asUser := tokenAuth(tok)
	asUser.IsToken = false
	if err := pingErr(t, saslAddr, asUser.AsSha512Mechanism()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("the token id as a user name: %v", err)
	}

	// Describe: alice and bob (renewer) see it, HMAC included; carol not.
	for _, who := range []string{"alice", "bob"} {
		ds, err := userAdmin(t, saslAddr, who).DescribeDelegationTokens(ctx)
		if err != nil || len(ds) != 1 || ds[0].TokenID != tok.TokenID || string(ds[0].HMAC) != string(tok.HMAC) || len(ds[0].Renewers) != 1 {
			t.Fatalf("%s describes: %+v, %v", who, ds, err)
		}
	}
	if ds, err := alice.DescribeDelegationTokens(ctx, kadm.Principal{Type: "User", Name: "carol"}); err != nil || len(ds) != 0 {
		t.Fatalf("alice describes carol's tokens: %+v, %v", ds, err)
	}

	// Renew: bob may, carol may not.
	if _, err := userAdmin(t, saslAddr, "carol").RenewDelegationToken(ctx, tok.HMAC, time.Minute); !errors.Is(err, kerr.DelegationTokenOwnerMismatch) {
		t.Fatalf("carol renews: %v", err)
	}
	exp, err := userAdmin(t, saslAddr, "bob").RenewDelegationToken(ctx, tok.HMAC, time.Minute)
	if err != nil || exp.Sub(time.Now()) > time.Minute+5*time.Second || exp.Sub(time.Now()) < 50*time.Second {
		t.Fatalf("bob renews for a minute: expiry %v, %v", exp, err)
	}
	if _, err := alice.RenewDelegationToken(ctx, []byte("no such hmac"), time.Minute); !errors.Is(err, kerr.DelegationTokenNotFound) {
		t.Fatalf("renew an unknown HMAC: %v", err)
	}

	// Expire at once: the token neither authenticates nor is described.
	if _, err := alice.ExpireDelegationToken(ctx, tok.HMAC, -time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := pingErr(t, saslAddr, tokenAuth(tok).AsSha512Mechanism()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("an expired token: %v", err)
	}
	if ds, err := alice.DescribeDelegationTokens(ctx); err != nil || len(ds) != 0 {
		t.Fatalf("tokens after the expiry: %+v, %v", ds, err)
	}

	// The secret key is not shown by DescribeConfigs.
	rc, err := kadm.NewClient(newClient(t, kgo.SeedBrokers(plainAddr))).DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rc {
		for _, c := range r.Configs {
			if c.Key == "delegation.token.secret.key" && (!c.Sensitive || c.Value != nil) {
				t.Fatalf("delegation.token.secret.key described as %+v", c)
			}
		}
	}

	// Without the secret key, tokens are off.
	_, offPlain, offSASL := saslBroker(t)
	if res, err := kadm.NewClient(newClient(t, kgo.SeedBrokers(offPlain))).AlterUserSCRAMs(ctx, nil,
		[]kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"}}); err != nil || res["alice"].Err != nil {
		t.Fatalf("alice on the second broker: %v %v", err, res["alice"].Err)
	}
	if _, err := userAdmin(t, offSASL, "alice").CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); !errors.Is(err, kerr.DelegationTokenAuthDisabled) {
		t.Fatalf("create without delegation.token.secret.key: %v", err)
	}
}

// TestKafkaDelegationTokensTool: Kafka 4.3's kafka-delegation-tokens
// (DelegationTokenCommand) creates, describes, renews and expires a token
// as alice over SASL_PLAINTEXT, and Kafka's Java producer, consumer and
// Admin authenticate with the token (ScramLoginModule tokenauth="true").
func TestKafkaDelegationTokensTool(t *testing.T) {
	lib := kafkaLib(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, saslAddr := tokenBroker(t, ctx)
	dir := t.TempDir()
	aliceProps := filepath.Join(dir, "alice.properties")
	if err := os.WriteFile(aliceProps, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-pw";`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const tool = "org.apache.kafka.tools.DelegationTokenCommand"
	out := kafkaTool(t, ctx, lib, tool, "--bootstrap-server", saslAddr, "--command-config", aliceProps,
		"--create", "--max-life-time-period", "-1", "--renewer-principal", "User:bob")
	t.Logf("kafka-delegation-tokens --create:\n%s", out)
	m := regexp.MustCompile(`(?m)^(\S+)\s+(\S+)\s+User:alice\s+User:alice\s+\[User:bob\]`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no token row in:\n%s", out)
	}
	id, hmac := m[1], m[2]
	out = kafkaTool(t, ctx, lib, tool, "--bootstrap-server", saslAddr, "--command-config", aliceProps, "--describe", "--owner-principal", "User:alice")
	if !strings.Contains(out, id) || !strings.Contains(out, hmac) {
		t.Fatalf("describe does not list %s:\n%s", id, out)
	}
	out = kafkaTool(t, ctx, lib, tool, "--bootstrap-server", saslAddr, "--command-config", aliceProps, "--renew", "--hmac", hmac, "--renew-time-period", "-1")
	if !strings.Contains(out, "Completed renew operation") {
		t.Fatalf("renew:\n%s", out)
	}

	// Kafka's Java clients with the token.
	tokProps := filepath.Join(dir, "token.properties")
	if err := os.WriteFile(tokProps, []byte(`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="`+id+`" password="`+hmac+`" tokenauth="true";`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(newClient(t, kgo.SeedBrokers(saslAddr), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism()))).CreateTopic(ctx, 3, 1, nil, "java-token"); err != nil {
		t.Fatal(err)
	}
	src, _ := filepath.Abs(filepath.Join("javaclients", "SaslClient.java"))
	log4j, _ := filepath.Abs(filepath.Join("..", "bench", "log4j2.properties"))
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-Dlog4j2.configurationFile="+log4j, "-cp", filepath.Join(lib, "*"), src,
		saslAddr, "java-token", "group-token", "SCRAM-SHA-512", id, hmac)
	cmd.Env = append(os.Environ(), "KAFKA_CLIENT_PROPS="+tokProps)
	jout, err := cmd.CombinedOutput()
	t.Logf("Java client with a delegation token: %s", grepLines(string(jout), " ok"))
	for _, want := range []string{"produce ok", "consume ok", "admin ok"} {
		if !strings.Contains(string(jout), want) {
			t.Fatalf("Java client with a token: no %q (%v):\n%s", want, err, jout)
		}
	}

	out = kafkaTool(t, ctx, lib, tool, "--bootstrap-server", saslAddr, "--command-config", aliceProps, "--expire", "--hmac", hmac, "--expiry-time-period", "-1")
	if !strings.Contains(out, "Completed expire operation") {
		t.Fatalf("expire:\n%s", out)
	}
	out = kafkaTool(t, ctx, lib, tool, "--bootstrap-server", saslAddr, "--command-config", aliceProps, "--describe")
	if strings.Contains(out, id) {
		t.Fatalf("the expired token is still described:\n%s", out)
	}
	if err := pingErr(t, saslAddr, scram.Auth{User: id, Pass: hmac, IsToken: true}.AsSha512Mechanism()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("the expired token logs in: %v", err)
	}
}

// TestClusterDelegationTokens: on a 3-node cluster, a token created
// through a follower (forwarded to the leader) authenticates on every
// node, survives the leader's kill -9 and a node's restart, and once
// expired through another node authenticates on none.
func TestClusterDelegationTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster: not in -short")
	}
	c := brokertest.StartClusterListeners(t, 3, []string{"SASL_PLAINTEXT"}, "--sasl-mechanisms", "SCRAM-SHA-512",
		"--broker-config", "delegation.token.secret.key=cluster-token-secret")
	leader := c.WaitLeader(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := kadm.NewClient(newClient(t, kgo.SeedBrokers(c.Seeds()...))).AlterUserSCRAMs(ctx, nil,
		[]kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"}})
	if err != nil || res["alice"].Err != nil {
		t.Fatalf("create alice: %v %v", err, res["alice"].Err)
	}
	var follower *brokertest.Node
	for _, n := range c.Nodes() {
		if n.ID != leader {
			follower = n
			break
		}
	}
	// One seed: the admin request goes to this follower, which forwards it.
	alice := func(n *brokertest.Node) *kadm.Client {
		return kadm.NewClient(newClient(t, kgo.SeedBrokers(n.Listeners["SASL_PLAINTEXT"]),
			kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism())))
	}
	var tok kadm.DelegationToken
	testwait.For(t, "alice logs in and creates a token through a follower", 30*time.Second, func() bool {
		tok, err = alice(follower).CreateDelegationToken(ctx, kadm.CreateDelegationToken{})
		return err == nil
	})
	loginsOn := func(what string, want bool, nodes ...*brokertest.Node) {
		t.Helper()
		for _, n := range nodes {
			testwait.For(t, fmt.Sprintf("%s: token login on node %d is %v", what, n.ID, want), 30*time.Second, func() bool {
				return (pingErr(t, n.Listeners["SASL_PLAINTEXT"], tokenAuth(tok).AsSha512Mechanism()) == nil) == want
			})
		}
	}
	loginsOn("created", true, c.Nodes()...)
	c.Kill(leader)
	var live []*brokertest.Node
	for _, id := range c.LiveIDs() {
		live = append(live, c.Node(id))
	}
	c.WaitLeader(t, time.Minute)
	loginsOn("after the leader's kill", true, live...)
	c.Restart(leader)
	c.WaitCaughtUp(t, leader, time.Minute)
	loginsOn("after the old leader's restart", true, c.Node(leader))
	testwait.For(t, "alice expires the token through the old leader", 30*time.Second, func() bool {
		_, err = alice(c.Node(leader)).ExpireDelegationToken(ctx, tok.HMAC, -time.Millisecond)
		return err == nil
	})
	loginsOn("expired", false, c.Nodes()...)
}

// TestDelegationTokenACLs: with the ACL authorizer, creating a token for
// another owner (KIP-373) needs CREATE_TOKENS on that USER, and a
// principal that neither owns, requested nor renews a token sees it with
// DESCRIBE_TOKENS on its owner's USER; a token's login is its owner.
func TestDelegationTokenACLs(t *testing.T) {
	_, saslAddr := aclSASLBroker(t, "admin-pw", "--broker-config", "delegation.token.secret.key=acl-token-secret")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adminCl := newClient(t, kgo.SeedBrokers(saslAddr), kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pw"}.AsSha512Mechanism()))
	admin := kadm.NewClient(adminCl)
	var ups []kadm.UpsertSCRAM
	for _, u := range []string{"alice", "bob", "carol"} {
		ups = append(ups, kadm.UpsertSCRAM{User: u, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: u + "-pw"})
	}
	if res, err := admin.AlterUserSCRAMs(ctx, nil, ups); err != nil || res["alice"].Err != nil {
		t.Fatalf("users: %v %+v", err, res)
	}
	grantOnUser := func(who string, op kmsg.ACLOperation, user string) {
		t.Helper()
		req := kmsg.NewPtrCreateACLsRequest()
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeUser, user, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = who, "*", op, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, c)
		resp, err := req.RequestWith(ctx, adminCl)
		if err != nil || resp.Results[0].ErrorCode != 0 {
			t.Fatalf("grant %s %v on %s: %v %+v", who, op, user, err, resp)
		}
	}
	bob := kadm.Principal{Type: "User", Name: "bob"}
	alice := userAdmin(t, saslAddr, "alice")
	if _, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: &bob}); !errors.Is(err, kerr.DelegationTokenAuthorizationFailed) {
		t.Fatalf("alice creates bob's token without CREATE_TOKENS: %v", err)
	}
	grantOnUser("User:alice", kmsg.ACLOperationCreateTokens, "User:bob")
	tok, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: &bob})
	if err != nil || tok.Owner.Name != "bob" || tok.TokenRequesterPrincipal.Name != "alice" {
		t.Fatalf("alice creates bob's token: %+v, %v", tok, err)
	}
	bobByToken := kadm.NewClient(newClient(t, kgo.SeedBrokers(saslAddr), kgo.SASL(tokenAuth(tok).AsSha512Mechanism())))
	if _, err := bobByToken.CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Fatalf("the token's login creating a token: %v", err)
	}
	for who, want := range map[string]int{"alice": 1, "bob": 1, "carol": 0} {
		if ds, err := userAdmin(t, saslAddr, who).DescribeDelegationTokens(ctx); err != nil || len(ds) != want {
			t.Fatalf("%s describes: %d tokens, %v; want %d", who, len(ds), err, want)
		}
	}
	grantOnUser("User:carol", kmsg.ACLOperationDescribeTokens, "User:bob")
	if ds, err := userAdmin(t, saslAddr, "carol").DescribeDelegationTokens(ctx); err != nil || len(ds) != 1 || ds[0].TokenID != tok.TokenID {
		t.Fatalf("carol with DESCRIBE_TOKENS on User:bob describes: %+v, %v", ds, err)
	}
}
