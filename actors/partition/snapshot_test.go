package partition

import (
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
