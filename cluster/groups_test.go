package cluster

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/regent-broker/regent/actors/replication"
)

// TestEntryAfterRoundTrip: a partition group's entry carries the metadata
// state index; a version-1 entry carries none; a later version is
// unreadable, not misread.
func TestEntryAfterRoundTrip(t *testing.T) {
	cmds := []entryCommand{{key: "partition/t/00ff/0", kind: "partition.append", payload: []byte("xyz")}}
	enc := encodeEntryAfter(cmds, true, 1<<40+7)
	got, after, err := decodeEntryAfter(enc)
	if err != nil || after != 1<<40+7 || len(got) != 1 || string(got[0].payload) != "xyz" {
		t.Fatalf("v2 round trip: %+v after %d err %v", got, after, err)
	}
	if _, after, err := decodeEntryAfter(encodeEntry(cmds)); err != nil || after != 0 {
		t.Fatalf("v1: after %d err %v", after, err)
	}
	if a, a1 := entryAfter(enc), entryAfter(encodeEntry(cmds)); a != 1<<40+7 || a1 != 0 {
		t.Fatalf("header reads: %d and %d, want %d and 0", a, a1, uint64(1<<40+7))
	}
	for i := range len(enc) {
		if _, _, err := decodeEntryAfter(enc[:i]); err == nil {
			t.Fatalf("truncated v2 entry of %d bytes decoded", i)
		}
	}
	newer := append([]byte{entryVersionAfter + 1}, enc[1:]...)
	if _, _, err := decodeEntryAfter(newer); !errors.Is(err, replication.ErrUnreadable) {
		t.Fatalf("version %d: %v, want ErrUnreadable", entryVersionAfter+1, err)
	}
}

// TestAwaitMetadata: a partition group applies an entry only once this
// node's metadata state holds the index it carries, and stops waiting when
// the group shuts down.
func TestAwaitMetadata(t *testing.T) {
	meta := &Raft{}
	meta.fsm = &fsm{r: meta}
	r := &Raft{stop: make(chan struct{}), log: slog.Default()}
	f := &fsm{r: r, meta: meta}
	done := make(chan bool, 1)
	go func() { done <- f.awaitMetadata(5) }()
	advance := func(i uint64) {
		meta.fsm.lastApplied.Store(i)
		meta.fsm.applied.changed()
	}
	advance(3)
	select {
	case <-done:
		t.Fatal("applied with the metadata state at 3 of 5")
	case <-time.After(50 * time.Millisecond): // a window for a wrong wake-up, not a synchronization
	}
	advance(5)
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("wait failed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting with the metadata state at 5")
	}
	go func() { done <- f.awaitMetadata(9) }()
	close(r.stop)
	select {
	case ok := <-done:
		if ok {
			t.Fatal("wait succeeded after shutdown")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting after shutdown")
	}
	if v, ok := (&fsm{}).metadataIndex(); ok || v != 0 {
		t.Fatalf("metadata group's entries carry an index: %d", v)
	}
	if v, ok := f.metadataIndex(); !ok || v != 5 {
		t.Fatalf("partition group's entries carry %d, %v; want 5", v, ok)
	}
}
