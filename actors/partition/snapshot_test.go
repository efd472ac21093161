package partition

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestProducerSnapshotBoundsReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "producer-state.json")
	lg := &memLog{}
	st, err := openStateLog(lg, defaultConfig(t), 0, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := int32(0); i < 3; i++ {
		if res := st.produce(batch(t, 5, 0, i*2, 2, false), now.UnixMilli()); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if res := st.produce(txnBatch(t, 6, 0, 0, 1), now.UnixMilli()); res.Err != nil { // open txn at 6
		t.Fatal(res.Err)
	}
	if err := st.snapshot(); err != nil {
		t.Fatal(err)
	}
	if res := st.produce(batch(t, 5, 0, 6, 2, false), now.UnixMilli()); res.Err != nil { // 7-8, after the snapshot
		t.Fatal(res.Err)
	}

	st2, err := openStateLog(lg, defaultConfig(t), 0, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := st2.produce(batch(t, 5, 0, 6, 2, false), now.UnixMilli()); res.Err != nil || res.BaseOffset != 7 {
		t.Fatalf("duplicate of a batch after the snapshot: %+v", res)
	}
	if res := st2.produce(batch(t, 5, 0, 4, 2, false), now.UnixMilli()); res.Err != nil || res.BaseOffset != 4 {
		t.Fatalf("duplicate of a batch before the snapshot: %+v", res)
	}
	if lso := st2.st.LastStable(); lso != 6 {
		t.Fatalf("open transaction from the snapshot: LSO %d, want 6", lso)
	}

	// A snapshot past the log's end (the log was truncated) is ignored.
	short := &memLog{}
	st3, err := openStateLog(short, defaultConfig(t), 0, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(st3.st.ProducerInfos()) != 0 {
		t.Fatalf("state from a snapshot that does not match the log: %+v", st3.st.ProducerInfos())
	}
}

// TestProducerSnapshotFormats: a version 1 (JSON) snapshot is still read;
// a damaged or truncated version 2 one is refused and leaves nothing
// behind (the whole log is replayed); a snapshot with nothing changed
// since the last one is not written again.
func TestProducerSnapshotFormats(t *testing.T) {
	path := filepath.Join(t.TempDir(), "producer-state.json")
	lg := &memLog{}
	st, err := openStateLog(lg, defaultConfig(t), 0, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	st.produce(batch(t, 5, 0, 0, 2, false), now) // 0-1
	st.produce(txnBatch(t, 6, 0, 0, 1), now)     // 2, open
	st.produce(txnBatch(t, 7, 0, 0, 1), now)     // 3
	st.writeMarker(7, 0, false, 0, now)          // 4: abort
	want := fmt.Sprintf("%+v %+v %d", st.st.ProducerInfos(), st.st.Aborted(), st.st.LastStable())

	// The batches carry their own timestamps (batch() stamps time.Now()).
	ts := map[int64]int64{}
	for _, p := range st.st.ProducerInfos() {
		ts[p.ProducerID] = p.LastTimestamp
	}
	v1 := fmt.Sprintf(`{"version":1,"offset":5,"aborted":[{"ProducerID":7,"FirstOffset":3,"LastOffset":4}],"producers":{`+
		`"5":{"epoch":0,"batches":[{"FirstSeq":0,"LastSeq":1,"FirstOffset":0,"LastOffset":1,"Timestamp":-1}],"txn_first_offset":-1,"coordinator_epoch":-1,"last_timestamp":%d},`+
		`"6":{"epoch":0,"batches":[{"FirstSeq":0,"LastSeq":0,"FirstOffset":2,"LastOffset":2,"Timestamp":-1}],"txn_first_offset":2,"coordinator_epoch":-1,"last_timestamp":%d},`+
		`"7":{"epoch":0,"batches":[{"FirstSeq":0,"LastSeq":0,"FirstOffset":3,"LastOffset":3,"Timestamp":-1}],"txn_first_offset":-1,"coordinator_epoch":0,"last_timestamp":%d}}}`,
		ts[5], ts[6], ts[7])
	restored := NewState(defaultConfig(t), 0, 0, 5)
	if off, ok := restored.restoreSnapshot([]byte(v1)); !ok || off != 5 {
		t.Fatalf("version 1 refused: %d %v", off, ok)
	}
	if got := fmt.Sprintf("%+v %+v %d", restored.ProducerInfos(), restored.Aborted(), restored.LastStable()); got != want {
		t.Fatalf("version 1 restored\n%s\nwant\n%s", got, want)
	}

	raw := st.st.encodeSnapshot()
	for _, bad := range [][]byte{raw[:len(raw)-1], raw[:10], append(append([]byte(nil), raw[:20]...), append([]byte{raw[20] ^ 1}, raw[21:]...)...)} {
		fresh := NewState(defaultConfig(t), 0, 0, 5)
		if _, ok := fresh.restoreSnapshot(bad); ok || fresh.producers.len() != 0 || fresh.LastStable() != 5 || len(fresh.Aborted()) != 0 {
			t.Fatalf("damaged snapshot (%d bytes) loaded: %v, %d producers", len(bad), ok, fresh.producers.len())
		}
	}

	if err := st.snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := st.snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an unchanged state was snapshotted again: %v", err)
	}
	st.produce(batch(t, 5, 0, 2, 1, false), now)
	if err := st.snapshot(); err != nil {
		t.Fatal(err)
	}
	st2, err := openStateLog(lg, defaultConfig(t), 0, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprintf("%+v %d", st2.st.ProducerInfos(), st2.st.LastStable()), fmt.Sprintf("%+v %d", st.st.ProducerInfos(), st.st.LastStable()); got != want {
		t.Fatalf("reopened from the snapshot\n%s\nwant\n%s", got, want)
	}
}
