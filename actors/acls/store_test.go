package acls

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/cluster/clustertest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func anyFilter() Filter {
	return Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
}

func TestStorePersists(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{DataDir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	a := allow(Topic, Literal, "t", "User:a", "*", Read)
	b := deny(Group, Prefixed, "g", "User:*", "*", All)
	if err := s.Create([]ACL{a, b, a}); err != nil {
		t.Fatal(err)
	}
	if err := s.Create([]ACL{a}); err != nil { // already there: no change
		t.Fatal(err)
	}
	if n := s.Set().Len(); n != 2 {
		t.Fatalf("%d bindings, want 2", n)
	}
	f := anyFilter()
	f.ResourceType = Group
	deleted, err := s.Delete([]Filter{f, f})
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 2 || len(deleted[0]) != 1 || deleted[0][0] != b || len(deleted[1]) != 1 {
		t.Fatalf("deleted %v", deleted)
	}
	s.Close()
	if err := s.Create([]ACL{b}); err == nil {
		t.Fatal("create after close succeeded")
	}

	s2, err := Open(Options{DataDir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := s2.Set().All(); len(got) != 1 || got[0] != a {
		t.Fatalf("reopened set %v, want [%v]", got, a)
	}
	if ok, _ := Authorize(s2.Set(), Config{}, "User:a", "h", Describe, Topic, "t"); !ok {
		t.Fatal("reopened set does not allow what it holds")
	}
}

// TestStoreReplicated: bindings created and deleted on the leader are on
// every node, persisted by each; a follower refuses to propose with
// NOT_CONTROLLER; a node reopened from its own directory has them.
func TestStoreReplicated(t *testing.T) {
	r := clustertest.New(t, 3)
	dirs := make([]string, 3)
	stores := make([]*Store, 3)
	for i := range stores {
		dirs[i] = t.TempDir()
		s, err := Open(Options{DataDir: dirs[i], Repl: r.Node(i), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	a := allow(Topic, Prefixed, "orders", "User:a", "*", Write)
	b := allow(TransactionalID, Literal, "tx", "User:a", "*", Write)
	if err := stores[0].Create([]ACL{a, b}); err != nil {
		t.Fatal(err)
	}
	for i, s := range stores {
		if s.Set().Len() != 2 {
			t.Fatalf("node %d holds %v", i, s.Set().All())
		}
	}
	err := stores[1].Create([]ACL{a})
	if !errors.Is(err, kerr.NotController) {
		t.Fatalf("create on a follower: %v, want NOT_CONTROLLER", err)
	}
	f := anyFilter()
	f.ResourceType = TransactionalID
	if _, err := stores[1].Delete([]Filter{f}); !errors.Is(err, kerr.NotController) {
		t.Fatalf("delete on a follower: %v, want NOT_CONTROLLER", err)
	}
	r.SetLeader(2)
	if _, err := stores[2].Delete([]Filter{f}); err != nil {
		t.Fatal(err)
	}
	for i, s := range stores {
		if got := s.Set().All(); len(got) != 1 || got[0] != a {
			t.Fatalf("node %d holds %v, want [%v]", i, got, a)
		}
		s.Close()
	}
	re, err := Open(Options{DataDir: dirs[1], Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if ok, _ := Authorize(re.Set(), Config{}, "User:a", "h", Write, Topic, "orders-eu"); !ok {
		t.Fatalf("reopened follower's set %v does not allow WRITE on orders-eu", re.Set().All())
	}
}

// TestStoreForwards: a follower with a Forwarder hands its changes to the
// leader (as Kafka's brokers forward CreateAcls/DeleteAcls to the
// controller) and answers with the leader's result; the leader refuses
// anything but ACL changes.
func TestStoreForwards(t *testing.T) {
	r := clustertest.New(t, 2)
	var stores [2]*Store
	for i := range stores {
		s, err := Open(Options{DataDir: t.TempDir(), Repl: r.Node(i), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		stores[i] = s
	}
	stores[1].SetForwarder(func(_ context.Context, body []byte) ([]byte, error) { return stores[0].ServeForwarded(body), nil })
	a := allow(Group, Literal, "g", "User:a", "*", Read)
	if err := stores[1].Create([]ACL{a}); err != nil {
		t.Fatalf("create on the follower: %v", err)
	}
	if !stores[0].Set().Contains(a) || !stores[1].Set().Contains(a) {
		t.Fatal("forwarded create not applied on both nodes")
	}
	f := anyFilter()
	deleted, err := stores[1].Delete([]Filter{f, f})
	if err != nil || len(deleted) != 2 || len(deleted[0]) != 1 || deleted[0][0] != a {
		t.Fatalf("delete on the follower: %v %v", deleted, err)
	}
	var rep forwardReply
	if err := json.Unmarshal(stores[0].ServeForwarded([]byte(`{"kind":"topics.delete","command":{}}`)), &rep); err != nil || rep.Code != kerr.InvalidRequest.Code {
		t.Fatalf("a forwarded topic deletion: %+v %v, want INVALID_REQUEST", rep, err)
	}
}
