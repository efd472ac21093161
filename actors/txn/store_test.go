package txn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/regent-broker/regent/storage/recordlog"
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
	s, _, err := openStore(dir, false, nil, 4096)
	if err != nil {
		t.Fatal(err)
	}
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

// The frame format is the one txn.log has always had: a file written
// before the store moved onto storage/recordlog reads, and the store
// still writes the same bytes.
func TestStoreFrameFormat(t *testing.T) {
	frame := func(id string, value []byte) []byte {
		body := binary.BigEndian.AppendUint16(nil, uint16(len(id)))
		body = append(append(body, id...), value...)
		f := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
		f = binary.BigEndian.AppendUint32(f, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
		return append(f, body...)
	}
	a, _ := encodeTxn(sampleTxn("a", 2))
	b, _ := encodeTxn(sampleTxn("b", 5))
	if got := appendStoreFrame(nil, "a", a); !bytes.Equal(got, frame("a", a)) {
		t.Fatalf("frame\n%x\nwant\n%x", got, frame("a", a))
	}
	c, err := newPutCmd(&Txn{ID: "b", State: StateDead})
	if err != nil || !bytes.Equal(c.frame, frame("b", nil)) {
		t.Fatalf("tombstone frame %x %v", c.frame, err)
	}
	dir := t.TempDir()
	old := append(append(frame("a", a), frame("b", b)...), frame("b", nil)...)
	if err := os.WriteFile(filepath.Join(dir, storeLog), old, 0o644); err != nil {
		t.Fatal(err)
	}
	s, got, err := OpenStore(dir, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(got) != 1 || formatTxn(got["a"]) != formatTxn(sampleTxn("a", 2)) || s.Size() != int64(len(old)) {
		t.Fatalf("loaded %v, size %d", got, s.Size())
	}
}

// A damaged frame with good frames after it is not silently dropped:
// opening fails, naming the offset.
func TestStoreMidFileCorruption(t *testing.T) {
	dir := t.TempDir()
	s, _, err := OpenStore(dir, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if err := s.Put(sampleTxn(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	path := filepath.Join(dir, storeLog)
	raw, _ := os.ReadFile(path)
	raw[12] ^= 0xff
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = OpenStore(dir, false, nil)
	var ce *recordlog.CorruptError
	if !errors.As(err, &ce) || ce.Offset != 0 {
		t.Fatalf("open: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, storeTmp)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp file: %v", err)
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
