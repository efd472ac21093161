package txn

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func sampleTxn(id string, epoch int16) *Txn {
	return &Txn{ID: id, ProducerID: 7, ProducerEpoch: epoch, LastProducerID: -1, LastProducerEpoch: -1, NextProducerID: -1,
		TimeoutMs: 60000, State: StateOngoing, Partitions: []TopicPartition{{"t", 0}, {"t", 3}}, Groups: []string{"g"},
		StartMs: 5, LastUpdateMs: 6}
}

// Replay keeps the last state of every id, forgets tombstoned ids, and
// survives a torn or corrupt tail (truncating it).
func TestStoreReplayTornTail(t *testing.T) {
	dir := t.TempDir()
	s, got, err := OpenStore(dir, false, nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("open: %v %v", got, err)
	}
	for _, tx := range []*Txn{sampleTxn("a", 0), sampleTxn("b", 0), sampleTxn("a", 1), {ID: "b", State: StateDead}, sampleTxn("c", 4)} {
		if err := s.Put(tx); err != nil {
			t.Fatal(err)
		}
	}
	good := s.Size()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, tail := range map[string][]byte{
		"torn":    appendStoreFrame(nil, "d", []byte{1, 2, 3})[:9],
		"corrupt": func() []byte { f := appendStoreFrame(nil, "d", []byte{1, 2, 3}); f[len(f)-1] ^= 0xff; return f }(),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, storeLog)
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(tail)
			f.Close()
			s, got, err := OpenStore(dir, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if len(got) != 2 || got["a"].ProducerEpoch != 1 || got["c"].ProducerEpoch != 4 || got["b"] != nil {
				t.Fatalf("replayed %v", got)
			}
			if formatTxn(got["a"]) != formatTxn(sampleTxn("a", 1)) {
				t.Fatalf("a: %s", formatTxn(got["a"]))
			}
			if s.Size() != good {
				t.Fatalf("size %d after truncating, want %d", s.Size(), good)
			}
		})
	}
}

// The log is rewritten to its live records once it is mostly dead ones.
func TestStoreRewrite(t *testing.T) {
	dir := t.TempDir()
	s, _, err := OpenStore(dir, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.rewriteFloor = 4096
	for i := range 2000 {
		if err := s.Put(sampleTxn(fmt.Sprintf("id-%d", i%10), int16(i))); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Size(); n > 3*4096 {
		t.Fatalf("log is %d bytes after rewrites", n)
	}
	s.Close()
	_, got, err := OpenStore(dir, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || got["id-3"].ProducerEpoch != 1993 {
		t.Fatalf("after rewrite: %d ids, id-3 %+v", len(got), got["id-3"])
	}
}

func FuzzDecodeTxn(f *testing.F) {
	v, _ := encodeTxn(sampleTxn("a", 3))
	f.Add(v)
	f.Fuzz(func(t *testing.T, b []byte) {
		tx, err := decodeTxn("x", b)
		if err != nil {
			return
		}
		again, err := encodeTxn(tx)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if _, err := decodeTxn("x", again); err != nil {
			t.Fatalf("decode of re-encoded: %v", err)
		}
	})
}
