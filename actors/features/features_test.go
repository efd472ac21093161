package features

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestDefaultsAreKafka43NewCluster(t *testing.T) {
	f := Defaults()
	// Kafka 4.3's, and Regent's own regent.raft.version at its latest.
	want := map[string]int16{MetadataVersion: 30, KRaftVersion: 1, TransactionVersion: 2, GroupVersion: 1, ShareVersion: 1, StreamsVersion: 1, RegentRaftVersion: 1}
	if f.Epoch != 0 || len(f.Levels) != len(want) {
		t.Fatalf("defaults %+v", f)
	}
	for k, v := range want {
		if f.Level(k) != v {
			t.Errorf("%s = %d, want %d", k, f.Level(k), v)
		}
	}
}

func TestApplyRefusesAsKafka(t *testing.T) {
	cur := Defaults()
	for _, tc := range []struct {
		name string
		ups  []Update
		code *kerr.Error
		msg  string
	}{
		{"unknown", []Update{{Feature: "eligible.leader.replicas.version", Level: 1, Type: Upgrade}}, kerr.InvalidUpdateVersion, "does not support this feature"},
		{"above range", []Update{{Feature: TransactionVersion, Level: 3, Type: Upgrade}}, kerr.InvalidUpdateVersion, "only supports versions 0-2"},
		{"negative", []Update{{Feature: TransactionVersion, Level: -1, Type: SafeDowngrade}}, kerr.InvalidUpdateVersion, "cannot be less than 0"},
		{"downgrade as upgrade", []Update{{Feature: TransactionVersion, Level: 1, Type: Upgrade}}, kerr.InvalidUpdateVersion, "without setting the upgrade type"},
		{"metadata downgrade", []Update{{Feature: MetadataVersion, Level: 29, Type: SafeDowngrade}}, kerr.InvalidUpdateVersion, "only supports versions 30-30"},
		{"bad type", []Update{{Feature: TransactionVersion, Level: 2, Type: 9}}, kerr.InvalidUpdateVersion, "upgrade type"},
		{"duplicate", []Update{{Feature: TransactionVersion, Level: 1, Type: SafeDowngrade}, {Feature: TransactionVersion, Level: 0, Type: SafeDowngrade}}, kerr.InvalidRequest, "more than once"},
		// One bad update refuses the whole request.
		{"all or nothing", []Update{{Feature: TransactionVersion, Level: 1, Type: SafeDowngrade}, {Feature: GroupVersion, Level: 0, Type: SafeDowngrade}}, kerr.InvalidUpdateVersion, "group.version"},
	} {
		next, err := Apply(cur, tc.ups, 1)
		if !errors.Is(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err %v, want %v containing %q", tc.name, err, tc.code, tc.msg)
		}
		if next.Epoch != cur.Epoch || next.Level(TransactionVersion) != 2 {
			t.Errorf("%s: changed %+v", tc.name, next)
		}
	}
}

func TestApplyDowngradeAndUpgrade(t *testing.T) {
	f, err := Apply(Defaults(), []Update{{Feature: TransactionVersion, Level: 0, Type: SafeDowngrade}}, 1)
	if err != nil || f.Epoch != 1 {
		t.Fatalf("downgrade to 0: %v %+v", err, f)
	}
	if _, listed := f.Levels[TransactionVersion]; listed {
		t.Fatalf("level 0 is still listed: %+v", f)
	}
	if _, err := Apply(f, []Update{{Feature: TransactionVersion, Level: 2, Type: SafeDowngrade}}, 1); !errors.Is(err, kerr.InvalidUpdateVersion) {
		t.Fatalf("upgrade typed as downgrade: %v", err)
	}
	f, err = Apply(f, []Update{{Feature: TransactionVersion, Level: 2, Type: Upgrade}}, 1)
	if err != nil || f.Epoch != 2 || f.Level(TransactionVersion) != 2 {
		t.Fatalf("upgrade: %v %+v", err, f)
	}
	// The same level is no change of direction: accepted, epoch bumped.
	if f, err = Apply(f, []Update{{Feature: TransactionVersion, Level: 2, Type: Upgrade}}, 1); err != nil || f.Epoch != 3 {
		t.Fatalf("same level: %v %+v", err, f)
	}
}

func TestStorePersistsAndReopens(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{DataDir: dir, NodeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	update := func(ups ...Update) error {
		ch := make(chan error, 1)
		s.Update(ups, func(err error) { ch <- err })
		select {
		case err := <-ch:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("update not answered")
			return nil
		}
	}
	if err := update(Update{Feature: TransactionVersion, Level: 3, Type: Upgrade}); !errors.Is(err, kerr.InvalidUpdateVersion) {
		t.Fatalf("out of range: %v", err)
	}
	if err := update(Update{Feature: TransactionVersion, Level: 1, Type: SafeDowngrade}); err != nil {
		t.Fatal(err)
	}
	if f := s.Finalized(); f.Epoch != 1 || f.Level(TransactionVersion) != 1 {
		t.Fatalf("after update %+v", f)
	}
	if err := s.Validate([]Update{{Feature: TransactionVersion, Level: 2, Type: Upgrade}}); err != nil {
		t.Fatal(err)
	}
	if f := s.Finalized(); f.Level(TransactionVersion) != 1 {
		t.Fatalf("validate changed levels: %+v", f)
	}
	s.Close()
	// A restart reads the file.
	s2, err := Open(Options{DataDir: dir, NodeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if f := s2.Finalized(); f.Epoch != 1 || f.Level(TransactionVersion) != 1 || f.Level(MetadataVersion) != 30 {
		t.Fatalf("reopened %+v", f)
	}
	s2.Close()
	if err := s.Reopen(); err != nil {
		t.Fatal(err)
	}
	if f := s.Finalized(); f.Epoch != 1 || f.Level(TransactionVersion) != 1 {
		t.Fatalf("reopen in place %+v", f)
	}
}
