package users

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/cluster/clustertest"
)

func upsert(t *testing.T, user, pass string, m Mechanism, iters int32) Upsert {
	t.Helper()
	salt := []byte("salt-" + user)
	salted, err := SaltPassword(m, pass, salt, iters)
	if err != nil {
		t.Fatal(err)
	}
	return Upsert{User: user, Credential: FromSaltedPassword(m, salted, salt, iters)}
}

func TestStorePersistsAndVerifies(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Alter([]Upsert{
		upsert(t, "alice", "pw", ScramSHA512, 4096),
		upsert(t, "alice", "pw", ScramSHA256, 8192),
		upsert(t, "bob", "pw", ScramSHA256, 100), // too few iterations
	}, []Deletion{{User: "carol", Mechanism: ScramSHA256}})
	if err != nil {
		t.Fatal(err)
	}
	want := []error{nil, nil, kerr.UnacceptableCredential, kerr.ResourceNotFound}
	for i, w := range want {
		if !errors.Is(res[i], w) && !(w == nil && res[i] == nil) {
			t.Errorf("result %d: %v, want %v", i, res[i], w)
		}
	}
	c, ok := s.Lookup("alice", ScramSHA512)
	if !ok || !c.Verify("pw") || c.Verify("pW") {
		t.Fatalf("alice's SHA-512 credential: ok=%v", ok)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "meta", FileName))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"pw"`) {
		t.Fatal("the password is on disk")
	}
	if fi, _ := os.Stat(filepath.Join(dir, "meta", FileName)); fi.Mode().Perm() != 0o600 {
		t.Errorf("store file mode %v, want 0600", fi.Mode().Perm())
	}
	_ = s.Close()

	// Reopened: the same credentials; then a deletion.
	s2, err := Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	d := s2.Describe(nil)
	if len(d) != 1 || d[0].User != "alice" || len(d[0].Infos) != 2 || d[0].Infos[1].Iterations != 4096 || d[0].Infos[0].Iterations != 8192 {
		t.Fatalf("described after reopen: %+v", d)
	}
	res, err = s2.Alter(nil, []Deletion{{User: "alice", Mechanism: ScramSHA256}, {User: "alice", Mechanism: ScramSHA512}})
	if err != nil || res[0] != nil || res[1] != nil {
		t.Fatalf("delete: %v %v", res, err)
	}
	if len(s2.Describe(nil)) != 0 {
		t.Fatal("user left after deleting every credential")
	}
}

func TestStoreReplicates(t *testing.T) {
	fr := clustertest.New(t, 3)
	var stores []*Store
	for i := range 3 {
		s, err := Open(Options{DataDir: t.TempDir(), Repl: fr.Node(i)})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	res, err := stores[0].Alter([]Upsert{upsert(t, "alice", "pw", ScramSHA256, 4096)}, nil)
	if err != nil || res[0] != nil {
		t.Fatalf("alter on the leader: %v %v", res, err)
	}
	for i, s := range stores {
		if c, ok := s.Lookup("alice", ScramSHA256); !ok || !c.Verify("pw") {
			t.Errorf("node %d lacks alice's credential", i)
		}
	}
	// A follower refuses with NOT_CONTROLLER.
	if _, err := stores[1].Alter([]Upsert{upsert(t, "bob", "pw", ScramSHA256, 4096)}, nil); !errors.Is(err, kerr.NotController) {
		t.Errorf("alter on a follower: %v, want NOT_CONTROLLER", err)
	}
	// After a leader change the new leader writes, every node applies.
	fr.SetLeader(2)
	if res, err := stores[2].Alter(nil, []Deletion{{User: "alice", Mechanism: ScramSHA256}}); err != nil || res[0] != nil {
		t.Fatalf("delete on the new leader: %v %v", res, err)
	}
	for i, s := range stores {
		if _, ok := s.Lookup("alice", ScramSHA256); ok {
			t.Errorf("node %d still has alice", i)
		}
	}
	var _ cluster.Applier = stores[0]
}

func TestAddOffline(t *testing.T) {
	dir := t.TempDir()
	if err := AddOffline(dir, "admin", ScramSHA512, "adminpw", 0); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, ok := s.Lookup("admin", ScramSHA512); !ok || !c.Verify("adminpw") || c.Iterations != MinIterations {
		t.Fatalf("offline admin: ok=%v %+v", ok, c)
	}
	cdir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cdir, "raft"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := AddOffline(cdir, "admin", ScramSHA512, "pw", 0); err == nil || !strings.Contains(err.Error(), "cluster") {
		t.Errorf("cluster data dir: %v, want a refusal naming the cluster", err)
	}
}
