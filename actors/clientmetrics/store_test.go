package clientmetrics

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestStoreSetDeletePersist(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	v0 := s.Current().Version
	if err := s.Set("producers", map[string]string{"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Set("all", map[string]string{"metrics": "*"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Set("bad", map[string]string{"interval.ms": "5"}); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("bad interval: %v", err)
	}
	cur := s.Current()
	if len(cur.Subs) != 2 || cur.Subs[0].Name != "all" || cur.Version != v0+2 {
		t.Fatalf("after two sets: %+v", cur)
	}
	if err := s.Set("all", nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// A snapshot install's path: closed, reopened from the file.
	if err := s.Reopen(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*Store{s, s2} {
		sub, ok := st.Current().Get("producers")
		if !ok || sub.IntervalMs != 1000 || len(st.Current().Subs) != 1 {
			t.Fatalf("reloaded: %+v", st.Current())
		}
	}
	if s.Current().Version <= cur.Version {
		t.Fatal("reopen did not move the version on")
	}
}
