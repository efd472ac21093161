package interop_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/netio/tlstest"
)

// tlsBroker starts a broker with a PLAINTEXT and an SSL listener (the
// CA's broker certificate); extra flags are appended.
func tlsBroker(t *testing.T, x *brokertest.TLS, extra ...string) (b *brokertest.Broker, plainAddr, sslAddr string) {
	t.Helper()
	plainAddr, sslAddr = loopback(t), loopback(t)
	args := append([]string{"--listeners", "PLAINTEXT://" + plainAddr + ",SSL://" + sslAddr}, x.BrokerArgs()...)
	return brokertest.StartAt(t, plainAddr, append(args, extra...)...), plainAddr, sslAddr
}

func tlsClient(t *testing.T, addr string, cfg *tls.Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTLSConfig(cfg), kgo.RequestRetries(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestTLSKgo: franz-go over an SSL listener with a CA: topics made,
// records produced and consumed in order, Metadata gives the SSL
// listener's own address; plaintext bytes sent to the TLS port are
// refused while the TLS client keeps working; after the certificate files
// change and SIGHUP, new clients get the new certificate and the open
// client carries on.
func TestTLSKgo(t *testing.T) {
	x := brokertest.NewTLS(t, "ca")
	b, plainAddr, sslAddr := tlsBroker(t, x)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := tlsClient(t, sslAddr, x.ClientConfig(t, tlstest.Pair{}), kgo.DefaultProduceTopic("tls-t"), kgo.ConsumeTopics("tls-t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "tls-t"); err != nil {
		t.Fatalf("create topic over SSL: %v", err)
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 || fmt.Sprintf("%s:%d", md.Brokers[0].Host, md.Brokers[0].Port) != sslAddr {
		t.Fatalf("Metadata on the SSL listener gives %+v, want %s", md.Brokers, sslAddr)
	}
	const n = 2000
	produce := func(from int) {
		t.Helper()
		var rs []*kgo.Record
		for i := from; i < from+n; i++ {
			rs = append(rs, &kgo.Record{Key: []byte{byte(i % 3)}, Value: fmt.Appendf(nil, "%06d", i)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce over SSL: %v", err)
		}
	}
	consume := func(want int) {
		t.Helper()
		got, last := 0, map[int32]string{}
		for got < want {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consumed %d of %d: %v", got, want, err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if v := string(r.Value); v <= last[r.Partition] {
					t.Fatalf("partition %d: %s after %s", r.Partition, v, last[r.Partition])
				}
				last[r.Partition] = string(r.Value)
				got++
			})
		}
	}
	produce(0)
	consume(n)

	// Plaintext Kafka bytes to the TLS port: no Kafka answer, a close.
	raw, err := net.DialTimeout("tcp", sslAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.SetDeadline(time.Now().Add(20 * time.Second))
	frame := []byte{0, 0, 0, 0, 0, 18, 0, 0, 0, 0, 0, 9, 0, 1, 'x'}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	_, _ = raw.Write(frame)
	reply := make([]byte, 0, 64)
	buf := make([]byte, 64)
	for {
		k, err := raw.Read(buf)
		reply = append(reply, buf[:k]...)
		if err != nil {
			break
		}
	}
	raw.Close()
	if len(reply) >= 8 && binary.BigEndian.Uint32(reply[4:8]) == 9 {
		t.Fatal("the TLS port answered a plaintext request")
	}
	// The broker and its PLAINTEXT listener are unaffected.
	plain, err := kgo.NewClient(kgo.SeedBrokers(plainAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.Ping(ctx); err != nil {
		t.Fatalf("PLAINTEXT listener after the refusal: %v", err)
	}

	// Certificate reload: a new CA's certificate in the same files.
	x2 := brokertest.NewTLS(t, "ca2")
	for from, to := range map[string]string{x2.Server.CertFile: x.Server.CertFile, x2.Server.KeyFile: x.Server.KeyFile} {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Kill(b.PID(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// Poll: the reload runs on the broker's signal goroutine.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", sslAddr, x2.ClientConfig(t, tlstest.Pair{}))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no handshake with the reloaded certificate: %v\n%s", err, b.LogTail(2000))
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, with a deadline
	}
	cl2 := tlsClient(t, sslAddr, x2.ClientConfig(t, tlstest.Pair{}))
	if err := cl2.Ping(ctx); err != nil {
		t.Fatalf("client of the new CA: %v", err)
	}
	// The connections opened before the reload keep working.
	produce(n)
	consume(n)
}

// TestTLSClientCertPrincipal: with --tls-client-auth required, the client
// certificate's CN is the principal the authorizer checks: ACLs for
// User:alice let her write her topic and not another; a client without a
// certificate is not served.
func TestTLSClientCertPrincipal(t *testing.T) {
	x := brokertest.NewTLS(t, "ca")
	_, _, sslAddr := tlsBroker(t, x, "--tls-client-auth", "required", "--authorizer", "acl", "--super-users", "User:admin")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := kadm.NewClient(tlsClient(t, sslAddr, x.ClientConfig(t, x.Client(t, "admin"))))
	if _, err := admin.CreateTopics(ctx, 1, 1, nil, "alice-orders", "payroll"); err != nil {
		t.Fatalf("admin (User:admin by certificate) creates topics: %v", err)
	}
	mustCreateACLs(t, ctx, admin, literal().Topics("alice-orders").Allow("User:alice").Operations(kadm.OpWrite))

	alice := tlsClient(t, sslAddr, x.ClientConfig(t, x.Client(t, "alice")), kgo.RecordRetries(2))
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "alice-orders", Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatalf("alice produces to alice-orders: %v", err)
	}
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "payroll", Value: []byte("a")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces to payroll: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// The ACL names User:alice: mallory's certificate of the same CA gets
	// nothing.
	mallory := tlsClient(t, sslAddr, x.ClientConfig(t, x.Client(t, "mallory")), kgo.RecordRetries(2))
	if err := mallory.ProduceSync(ctx, &kgo.Record{Topic: "alice-orders", Value: []byte("m")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("mallory produces to alice-orders: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	anon := tlsClient(t, sslAddr, x.ClientConfig(t, tlstest.Pair{}))
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	defer pcancel()
	if err := anon.Ping(pctx); err == nil {
		t.Fatal("a client without a certificate was served with --tls-client-auth required")
	}
}

// TestTLSKcat: kcat (librdkafka) produces and consumes over SSL with a CA.
func TestTLSKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed")
	}
	x := brokertest.NewTLS(t, "ca")
	_, _, sslAddr := tlsBroker(t, x, "--broker-config", "num.partitions=1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	common := []string{"-b", sslAddr, "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + x.CA.CertFile, "-t", "kcat-tls"}
	var in bytes.Buffer
	for i := range 100 {
		fmt.Fprintf(&in, "m%03d\n", i)
	}
	p := exec.CommandContext(ctx, kcat, append(common, "-P")...)
	p.Stdin = &in
	if out, err := p.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P over SSL: %v: %s", err, out)
	}
	c := exec.CommandContext(ctx, kcat, append(common, "-C", "-o", "beginning", "-e", "-q")...)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("kcat -C over SSL: %v", err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != 100 || lines[0] != "m000" || lines[99] != "m099" {
		t.Fatalf("kcat consumed %d messages (%.40q...), want m000..m099", len(lines), out)
	}
}

// TestKgoConformanceSuiteTLS runs franz-go's kgo suite with every client
// on an SSL listener (KGO_TEST_TLS=ca:...), the SCRAM tests on a
// SASL_PLAINTEXT listener of the same broker (the suite's SCRAM clients
// do not use its TLS config). TestIssue769 is left out: it sets its own
// Dialer, which kgo refuses beside DialTLSConfig (NewClient fails and the
// test dereferences the nil client), a limit of the suite, not of TLS.
// KGO_TLS_RUN narrows the run to a regexp (a CI subset).
func TestKgoConformanceSuiteTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("kgo suite: not in -short")
	}
	x := brokertest.NewTLS(t, "ca")
	plainAddr, sslAddr, saslAddr := loopback(t), loopback(t), loopback(t)
	args := append([]string{"--listeners", "PLAINTEXT://" + plainAddr + ",SSL://" + sslAddr + ",SASL_PLAINTEXT://" + saslAddr, "--broker-config", "group.initial.rebalance.delay.ms=0"}, x.BrokerArgs()...)
	brokertest.StartAt(t, plainAddr, args...)
	env := append(kgoSCRAMEnv(t, plainAddr, saslAddr), "KGO_TEST_TLS=ca:"+x.CA.CertFile)
	run := os.Getenv("KGO_TLS_RUN")
	if run == "" {
		run = kgoTestsBut(t, "TestIssue769")
	}
	runKgoSuiteProbed(t, "Regent's SSL listener", sslAddr, plainAddr, 1, run, env...)
}

// kgoTestsBut is a -run regexp naming every kgo test except skip.
func kgoTestsBut(t *testing.T, skip ...string) string {
	t.Helper()
	out, err := exec.Command("go", "test", "-list", "^Test", "github.com/twmb/franz-go/pkg/kgo").Output()
	if err != nil {
		t.Fatalf("list kgo tests: %v", err)
	}
	var names []string
	for _, n := range strings.Fields(string(out)) {
		if strings.HasPrefix(n, "Test") && !slices.Contains(skip, n) {
			names = append(names, n)
		}
	}
	return "^(" + strings.Join(names, "|") + ")$"
}

// TestClusterMutualTLS: three nodes whose raft transport and admin
// endpoints are on mutual TLS form a cluster, elect, replicate, and elect
// again after the leader is killed; a user and an ACL made through the
// first leader hold on the next one; a raft or admin dial without the
// cluster certificate (or with another CA's) is refused.
// (allow.everyone.if.no.acl.found=true lets the anonymous client manage
// ACLs and users: no ACL names the cluster.)
func TestClusterMutualTLS(t *testing.T) {
	x := brokertest.NewTLS(t, "cluster-ca")
	c := brokertest.StartCluster(t, 3, append(x.ClusterArgs(), "--authorizer", "acl", "--broker-config", "allow.everyone.if.no.acl.found=true")...)
	leader := c.WaitLeader(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := c.Client(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, nil, "mtls"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	c.WaitTopic(t, "mtls", 1, 3, time.Minute)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "mtls", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "locked"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	mustCreateACLs(t, ctx, adm, literal().Topics("locked").Deny("User:*").Operations(kadm.OpWrite))
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-pw"}}); err != nil || res["carol"].Err != nil {
		t.Fatalf("create carol: %v %v", err, res["carol"].Err)
	}

	n := c.Node(leader)
	stranger := brokertest.NewTLS(t, "stranger-ca")
	for what, cfg := range map[string]*tls.Config{
		"no certificate":           x.ClientConfig(t, tlstest.Pair{}),
		"another CA's certificate": {Certificates: stranger.ClientConfig(t, stranger.Server).Certificates, RootCAs: x.ClientConfig(t, tlstest.Pair{}).RootCAs, MinVersion: tls.VersionTLS12},
	} {
		for port, addr := range map[string]string{"raft": n.Raft, "admin": n.Admin} {
			if refusedTLS(addr, cfg) != nil {
				t.Errorf("%s dial with %s was served", port, what)
			}
		}
	}
	// Plaintext HTTP to the admin endpoint gets no status.
	if out, err := exec.CommandContext(ctx, brokertest.Binary(t), "cluster", "status", "--admin", n.Admin).CombinedOutput(); err == nil {
		t.Errorf("plaintext `regent cluster status` was answered: %s", out)
	}

	c.Kill(leader)
	next := c.WaitLeader(t, time.Minute)
	if next == leader {
		t.Fatalf("leader %d still leads after being killed", leader)
	}
	cl2 := c.Client(t, kgo.RecordRetries(10))
	if err := cl2.ProduceSync(ctx, &kgo.Record{Topic: "mtls", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after failover: %v", err)
	}
	if err := cl2.ProduceSync(ctx, &kgo.Record{Topic: "locked", Value: []byte("no")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to locked on the new leader %d: %v, want TOPIC_AUTHORIZATION_FAILED", next, err)
	}
	users, err := kadm.NewClient(cl2).DescribeUserSCRAMs(ctx, "carol")
	if err != nil || users["carol"].Err != nil || len(users["carol"].CredInfos) != 1 {
		t.Fatalf("carol on the new leader %d: %v %+v", next, err, users)
	}
}

// refusedTLS dials addr with cfg and writes a byte; nil when the server
// refused (the handshake or the first read failed), an error naming what
// answered otherwise.
func refusedTLS(addr string, cfg *tls.Config) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// A raft RPC type byte, or the start of an HTTP request: either way
	// the server reads it only after verifying our certificate.
	_, _ = c.Write([]byte("GET /cluster/status HTTP/1.1\r\nHost: x\r\n\r\n"))
	if k, err := c.Read(make([]byte, 1)); err != nil || k == 0 {
		return nil
	}
	return errors.New("answered")
}

// TestSASLSSL: a SASL_SSL listener (SCRAM and PLAIN inside TLS) with
// --tls-client-auth requested and ACLs: franz-go with SCRAM-SHA-512
// produces and consumes, Metadata gives the SASL_SSL address, a wrong
// password is refused; the SASL identity, not the client certificate's,
// is the principal; kcat and confluent-kafka (librdkafka) with PLAIN and
// SCRAM-SHA-256.
func TestSASLSSL(t *testing.T) {
	x := brokertest.NewTLS(t, "ca")
	plainAddr, saslAddr := loopback(t), loopback(t)
	args := append([]string{"--listeners", "PLAINTEXT://" + plainAddr + ",SASL_SSL://" + saslAddr,
		"--tls-client-auth", "requested", "--authorizer", "acl", "--super-users", "User:ANONYMOUS",
		"--broker-config", "num.partitions=1"}, x.BrokerArgs()...)
	brokertest.StartAt(t, plainAddr, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The PLAINTEXT listener is the test's admin (ANONYMOUS is a super
	// user here): users, topics, ACLs.
	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(plainAddr)))
	var ups []kadm.UpsertSCRAM
	for _, u := range []string{"alice", "mallory"} {
		for _, m := range []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512} {
			ups = append(ups, kadm.UpsertSCRAM{User: u, Mechanism: m, Iterations: 4096, Password: u + "-pw"})
		}
	}
	res, err := adm.AlterUserSCRAMs(ctx, nil, ups)
	if err == nil {
		err = errors.Join(res["alice"].Err, res["mallory"].Err)
	}
	if err != nil {
		t.Fatalf("create users: %v", err)
	}
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "alice-t", "clients-t"); err != nil {
		t.Fatal(err)
	}
	mustCreateACLs(t, ctx, adm, literal().Topics("alice-t", "clients-t").Allow("User:alice").Operations(kadm.OpRead, kadm.OpWrite))
	mustCreateACLs(t, ctx, adm, literal().Groups("*").Allow("User:alice").Operations(kadm.OpRead))

	scramAs := func(user string, cert tlstest.Pair, opts ...kgo.Opt) *kgo.Client {
		auth := scram.Auth{User: user, Pass: user + "-pw"}
		return tlsClient(t, saslAddr, x.ClientConfig(t, cert), append([]kgo.Opt{kgo.SASL(auth.AsSha512Mechanism()), kgo.RecordRetries(2)}, opts...)...)
	}
	// alice logs in with SCRAM while presenting mallory's certificate:
	// SASL wins, she may write alice-t.
	alice := scramAs("alice", x.Client(t, "mallory"), kgo.ConsumeTopics("alice-t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	md, err := kadm.NewClient(alice).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 || fmt.Sprintf("%s:%d", md.Brokers[0].Host, md.Brokers[0].Port) != saslAddr {
		t.Fatalf("Metadata on SASL_SSL gives %+v, want %s", md.Brokers, saslAddr)
	}
	var rs []*kgo.Record
	for i := range 500 {
		rs = append(rs, &kgo.Record{Topic: "alice-t", Value: fmt.Appendf(nil, "%04d", i)})
	}
	if err := alice.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("alice (SCRAM-SHA-512 over TLS) produces: %v", err)
	}
	for got := 0; got < len(rs); {
		fs := alice.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("alice consumed %d of %d", got, len(rs))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != fmt.Sprintf("%04d", got) {
				t.Fatalf("record %d is %q", got, r.Value)
			}
			got++
		})
	}
	// mallory logs in with alice's certificate: still mallory.
	mallory := scramAs("mallory", x.Client(t, "alice"))
	if err := mallory.ProduceSync(ctx, &kgo.Record{Topic: "alice-t", Value: []byte("m")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("mallory with alice's certificate produces: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	wrong := tlsClient(t, saslAddr, x.ClientConfig(t, tlstest.Pair{}), kgo.SASL(scram.Auth{User: "alice", Pass: "nope"}.AsSha512Mechanism()))
	if err := wrong.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password over SASL_SSL: %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	kcat := needTool(t, "kcat")
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256"} {
		kcatSASLRoundTrip(ctx, t, kcat, "clients-t", mech, 300, "-b", saslAddr, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location="+x.CA.CertFile,
			"-X", "sasl.mechanisms="+mech, "-X", "sasl.username=alice", "-X", "sasl.password=alice-pw")
	}
	t.Log("kcat over SASL_SSL: PLAIN and SCRAM-SHA-256 x 300 lines produced and consumed; wrong password refused")

	py := needPython(t, "confluent_kafka")
	out, err := exec.CommandContext(ctx, py, "python/sasl_ssl_roundtrip.py", saslAddr, x.CA.CertFile, "clients-t", "alice", "alice-pw").CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python SASL_SSL round trip: %v", err)
	}
}

// TestTLSJavaClient: Kafka's Java client (4.3) producer, consumer group
// and Admin over SSL with a client certificate (mTLS, PEM trust and key
// stores), and over SASL_SSL with SCRAM-SHA-512 and with OAUTHBEARER (a
// JWT signed by a key of the broker's JWKS).
func TestTLSJavaClient(t *testing.T) {
	lib := kafkaLib(t)
	dir := t.TempDir()
	x := brokertest.NewTLS(t, "ca")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks := filepath.Join(dir, "jwks.json")
	raw, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}}})
	if err := os.WriteFile(jwks, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	plainAddr, sslAddr, saslAddr := loopback(t), loopback(t), loopback(t)
	args := append([]string{"--listeners", "PLAINTEXT://" + plainAddr + ",SSL://" + sslAddr + ",SASL_SSL://" + saslAddr,
		"--tls-client-auth", "requested", "--sasl-mechanisms", "SCRAM-SHA-512,OAUTHBEARER",
		"--sasl-oauthbearer-jwks", jwks, "--sasl-oauthbearer-audience", "regent"}, x.BrokerArgs()...)
	brokertest.StartAt(t, plainAddr, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(plainAddr)))
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "java", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "java-pw"}}); err != nil || res["java"].Err != nil {
		t.Fatalf("create java: %v %v", err, res["java"].Err)
	}
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "java-tls"); err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(signer).Claims(jwt.Claims{Subject: "java-svc", Audience: jwt.Audience{"regent"}, IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(dir, "token.jwt")
	if err := os.WriteFile(tokFile, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	// Java's PEM key store: the certificate chain and the PKCS#8 key in one file.
	cli := x.Client(t, "java")
	keystore := filepath.Join(dir, "java-keystore.pem")
	var pem []byte
	for _, f := range []string{cli.KeyFile, cli.CertFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pem = append(pem, b...)
	}
	if err := os.WriteFile(keystore, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	trust := "ssl.truststore.type=PEM\nssl.truststore.location=" + x.CA.CertFile + "\n"
	src, _ := filepath.Abs(filepath.Join("javaclients", "SaslClient.java"))
	log4j, _ := filepath.Abs(filepath.Join("..", "bench", "log4j2.properties"))
	for _, tc := range []struct{ name, addr, props, mech, user, secret string }{
		{"SSL+mTLS", sslAddr, "security.protocol=SSL\n" + trust + "ssl.keystore.type=PEM\nssl.keystore.location=" + keystore + "\n", "NONE", "", ""},
		{"SASL_SSL/SCRAM-SHA-512", saslAddr, "security.protocol=SASL_SSL\n" + trust, "SCRAM-SHA-512", "java", "java-pw"},
		{"SASL_SSL/OAUTHBEARER", saslAddr, "security.protocol=SASL_SSL\n" + trust, "OAUTHBEARER", "", tokFile},
	} {
		props := filepath.Join(dir, "client.properties")
		if err := os.WriteFile(props, []byte(tc.props), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-Dlog4j2.configurationFile="+log4j,
			"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file://"+tokFile,
			"-cp", filepath.Join(lib, "*"), src, tc.addr, "java-tls", "group-"+strings.ReplaceAll(tc.name, "/", "-"), tc.mech, tc.user, tc.secret)
		cmd.Env = append(os.Environ(), "KAFKA_CLIENT_PROPS="+props)
		out, err := cmd.CombinedOutput()
		t.Logf("Java client over %s: %s", tc.name, grepLines(string(out), " ok"))
		for _, want := range []string{"produce ok", "consume ok", "admin ok"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("Java client %s: no %q (%v):\n%s", tc.name, want, err, out)
				break
			}
		}
	}
}
