package interop_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterForwardRefusesUnsigned: on a plaintext cluster with ACLs, a
// forward that names a super user reaches the leader's admin endpoint
// from someone without the cluster secret: unsigned, signed with another
// secret, stale or replayed, it is refused (401) and grants nothing (the
// anonymous client stays denied); membership changes likewise. The same
// forward signed with the nodes' secret is served (so the refusals are the
// signature's). A body over the 64 MiB limit is refused (413) and the
// node goes on serving forwards.
func TestClusterForwardRefusesUnsigned(t *testing.T) {
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3, "--authorizer", "acl", "--super-users", "User:admin")
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	secret, err := os.ReadFile(c.SecretFile())
	if err != nil {
		t.Fatal(err)
	}
	secret = bytes.TrimSpace(secret)
	leader := c.LeaderID(t)
	f := followerOf(c, leader)
	url := "http://" + c.Node(leader).Admin + "/kafka/forward"
	httpc := &http.Client{Timeout: 60 * time.Second}
	post := func(req *http.Request) (int, string) {
		t.Helper()
		resp, err := httpc.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", req.URL, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(raw)
	}

	// The attack: User:admin grants the anonymous client everything on
	// the cluster.
	ca := kmsg.NewPtrCreateACLsRequest()
	ca.Version = 3
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral
	cr.Principal, cr.Host = "User:ANONYMOUS", "*"
	cr.Operation, cr.PermissionType = kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
	ca.Creations = append(ca.Creations, cr)
	fwd, err := json.Marshal(map[string]any{"key": 30, "version": 3, "principal": "User:admin", "client_addr": "127.0.0.1:1", "body": ca.AppendTo(nil)})
	if err != nil {
		t.Fatal(err)
	}

	cl := followerClient(t, c.Node(f).Addr)
	leaderCl := followerClient(t, c.Node(leader).Addr)
	describeCode := func(cl *kgo.Client) int16 {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		return followerRequest(t, ctx, cl, req).(*kmsg.DescribeACLsResponse).ErrorCode
	}
	if code := describeCode(leaderCl); code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("DescribeAcls by the anonymous client before any grant: %v", kerr.ErrorForCode(code))
	}

	now := time.Now()
	for _, tc := range []struct {
		name string
		req  *http.Request
	}{
		{"unsigned", newPost(t, url, fwd)},
		{"another secret", signAdmin(t, newPost(t, url, fwd), []byte(strings.Repeat("x", 64)), fwd, now)},
		{"stale", signAdmin(t, newPost(t, url, fwd), secret, fwd, now.Add(-2*time.Minute))},
		{"body changed after signing", signAdmin(t, newPost(t, url, fwd), secret, []byte(`{"key":30}`), now)},
	} {
		if code, body := post(tc.req); code != http.StatusUnauthorized {
			t.Fatalf("%s forward: %d %s, want 401", tc.name, code, body)
		}
	}
	// Membership: an unsigned add-voter changes nothing either.
	peer := []byte(`{"id":9,"kafka":"127.0.0.1:1","raft":"127.0.0.1:2"}`)
	if code, body := post(newPost(t, "http://"+c.Node(f).Admin+"/cluster/voters", peer)); code != http.StatusUnauthorized {
		t.Fatalf("unsigned add-voter: %d %s, want 401", code, body)
	}
	if st, err := c.Status(leader); err != nil || st.HasVoter(9) || len(st.Voters) != 3 {
		t.Fatalf("voters after an unsigned add-voter: %+v %v", st.Voters, err)
	}
	// The leader's state is where a served forward would have applied.
	if code := describeCode(leaderCl); code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("DescribeAcls by the anonymous client after refused forwards: %v", kerr.ErrorForCode(code))
	}

	// The same forward signed with the cluster secret is served, once.
	good := signAdmin(t, newPost(t, url, fwd), secret, fwd, time.Now())
	replay := good.Clone(ctx)
	replay.Body = io.NopCloser(bytes.NewReader(fwd))
	if code, body := post(good); code != http.StatusOK {
		t.Fatalf("signed forward: %d %s", code, body)
	}
	if code, body := post(replay); code != http.StatusUnauthorized || !strings.Contains(body, "nonce") {
		t.Fatalf("replayed forward: %d %s, want 401 (nonce)", code, body)
	}
	// The leader answered once it applied the grant; the follower the
	// client asks applies it a moment later.
	testwait.For(t, "the signed grant lets the anonymous client DescribeAcls on the follower", time.Minute, func() bool {
		return describeCode(cl) == 0
	})

	// Over the limit: refused before it is decoded, signed or not.
	big := bytes.Repeat([]byte("a"), 64<<20+1)
	if code, body := post(newPost(t, url, big)); code != http.StatusUnauthorized {
		t.Fatalf("unsigned 64 MiB+1 forward: %d %s, want 401", code, body)
	}
	if code, body := post(signAdmin(t, newPost(t, url, big), secret, big, time.Now())); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "exceeds") {
		t.Fatalf("signed 64 MiB+1 forward: %d %s, want 413", code, body)
	}
	// The leader goes on: a follower's CreateTopics is forwarded and served.
	if code := createTopicAt(t, ctx, cl, "after-big-forward", 30000); code != 0 {
		t.Fatalf("CreateTopics through follower %d after the refusals: %v", f, kerr.ErrorForCode(code))
	}
	if now := c.LeaderID(t); now != leader {
		t.Logf("leadership moved from %d to %d during the test", leader, now)
	}
}

func newPost(t *testing.T, url string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

// signAdmin signs req as the README describes a node's admin requests
// (HMAC-SHA256 with the cluster secret over the method, request URI,
// timestamp, nonce and the body's SHA-256), for body at time at.
func signAdmin(t *testing.T, req *http.Request, secret, body []byte, at time.Time) *http.Request {
	t.Helper()
	var n [16]byte
	_, _ = rand.Read(n[:])
	nonce := hex.EncodeToString(n[:])
	ts := strconv.FormatInt(at.UnixMilli(), 10)
	digest := sha256.Sum256(body)
	m := hmac.New(sha256.New, secret)
	io.WriteString(m, "regent-admin-v1\n"+req.Method+"\n"+req.URL.RequestURI()+"\n"+ts+"\n"+nonce+"\n"+hex.EncodeToString(digest[:]))
	req.Header.Set("X-Regent-Timestamp", ts)
	req.Header.Set("X-Regent-Nonce", nonce)
	req.Header.Set("X-Regent-Signature", hex.EncodeToString(m.Sum(nil)))
	return req
}

// TestClusterSecretRotatesOneNodeAtATime: a plaintext cluster's secret,
// which authenticates its raft links and admin calls, is replaced while
// a producer writes, in the three rolling restarts the README gives
// (accept the new secret; prove it and accept the old; the new alone).
// After each node's restart it catches up over its raft links, and every
// acknowledged record is read back. A node left on the old secret alone
// is refused by the others.
func TestClusterSecretRotatesOneNodeAtATime(t *testing.T) {
	const (
		topic      = "secret-rotation"
		partitions = 3
	)
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	oldFile := c.SecretFile()
	var b [32]byte
	_, _ = rand.Read(b[:])
	newFile := filepath.Join(t.TempDir(), "new.secret")
	if err := os.WriteFile(newFile, []byte(hex.EncodeToString(b[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	createClusterTopic(t, ctx, c, topic, partitions, 3)
	c.WaitTopic(t, topic, partitions, 3, time.Minute)
	pr := startPacedProducer(t, ctx, c, topic, partitions, "rotation", 500)
	defer pr.abort()
	pr.waitAcks(t, ctx, 200)

	base := map[int32][]string{}
	for _, id := range c.IDs() {
		base[id] = slices.Clone(c.Node(id).Args)
	}
	// restart restarts node id with its first arguments and more (a
	// flag given again overrides the first).
	restart := func(id int32, more ...string) {
		t.Helper()
		c.Kill(id)
		c.Node(id).Args = append(slices.Clone(base[id]), more...)
		c.Restart(id)
	}
	for _, step := range [][]string{
		{"--cluster-secret-accept-file", newFile},
		{"--cluster-secret-file", newFile, "--cluster-secret-accept-file", oldFile},
		{"--cluster-secret-file", newFile},
	} {
		for _, id := range c.IDs() {
			restart(id, step...)
			c.WaitCaughtUp(t, id, time.Minute)
			pr.waitAcks(t, ctx, pr.acked()+100)
		}
	}

	// Every node is on the new secret alone: one restarted on the old
	// one is refused by the others, and rejoins with the new one.
	stale := c.IDs()[2]
	restart(stale)
	testwait.For(t, "the others to refuse the node on the old secret", time.Minute, func() bool {
		for _, id := range c.IDs() {
			if id != stale && strings.Contains(c.Node(id).LogTail(200), "raft link refused") {
				return true
			}
		}
		return false
	})
	restart(stale, "--cluster-secret-file", newFile)
	c.WaitCaughtUp(t, stale, time.Minute)

	acks := pr.finish(t)
	verifyAcked(t, "after the rotation", readLog(t, ctx, c, topic, partitions), acks)
}
