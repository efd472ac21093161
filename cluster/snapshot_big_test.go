package cluster

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestSnapshotOfBigState (REGENT_BIG_SNAPSHOT=1; REGENT_BIG_SNAPSHOT_MB,
// default 2048): capturing and persisting a snapshot of that much
// partition data (64 MiB segments over 8 partitions) takes under a second
// and writes under 10 MB, not counting the fsync of segment data the
// applies wrote (logged apart: the first snapshot after the data was
// written flushes it, the next finds it clean). Restoring it at start
// (after appends to every active segment) also costs O(files).
func TestSnapshotOfBigState(t *testing.T) {
	if os.Getenv("REGENT_BIG_SNAPSHOT") != "1" {
		t.Skip("writes gigabytes: set REGENT_BIG_SNAPSHOT=1")
	}
	mb := 2048
	if v, err := strconv.Atoi(os.Getenv("REGENT_BIG_SNAPSHOT_MB")); err == nil && v > 0 {
		mb = v
	}
	const segMB, parts = 64, 8
	root := t.TempDir()
	state, raftDir := filepath.Join(root, "state"), filepath.Join(root, "raft")
	chunk := bytes.Repeat([]byte("regent-snapshot!"), 1<<16) // 1 MiB
	var actives []string
	start := time.Now()
	for i := 0; i < mb/segMB; i++ {
		dir := filepath.Join(state, fmt.Sprintf("big-%d", i%parts))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		seg := filepath.Join(dir, fmt.Sprintf("%020d.log", (i/parts)*1000000))
		f, err := os.Create(seg)
		if err != nil {
			t.Fatal(err)
		}
		for range segMB {
			if _, err := f.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
		writeFile(t, seg[:len(seg)-len(".log")]+".index", "sparse")
		if i >= mb/segMB-parts {
			actives = append(actives, seg)
		}
	}
	for p := range parts {
		writeFile(t, filepath.Join(state, fmt.Sprintf("big-%d", p), "producer-state.json"), `{"producers":[]}`)
		writeFile(t, filepath.Join(state, fmt.Sprintf("big-%d", p), "log-start-offset-checkpoint"), "0\n")
	}
	writeFile(t, filepath.Join(state, "topics.json"), `{"big":8}`)
	t.Logf("wrote %d MiB in %s (not synced)", mb, time.Since(start).Round(time.Millisecond))

	var logs bytes.Buffer
	store, err := newSnapStore(filepath.Join(raftDir, "snapshots"), 2, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	snap := func(label string, index uint64) (string, time.Duration, int64) {
		t.Helper()
		w0 := procIO(t)
		t0 := time.Now()
		s, err := captureState(state, raftDir)
		if err != nil {
			t.Fatal(err)
		}
		s.index = index
		captured := time.Since(t0)
		sink, err := store.Create(1, index, 1, raft.Configuration{}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Persist(sink); err != nil {
			t.Fatal(err)
		}
		s.Release()
		took := time.Since(t0)
		w1 := procIO(t)
		written := w1["write_bytes"] - w0["write_bytes"]
		t.Logf("%s: %d files; capture %s, capture+persist %s; written by this process: %d bytes to storage (write_bytes), %d through write(2) (wchar); store: %s",
			label, len(s.files), captured.Round(time.Microsecond), took.Round(time.Microsecond), written, w1["wchar"]-w0["wchar"], lastLine(logs.String(), "snapshot stored"))
		return sink.ID(), took, written
	}
	snap("first snapshot (flushes the unsynced segments)", 100)
	for _, seg := range actives {
		appendFile(t, seg, "one more batch")
	}
	id, took, written := snap("second snapshot (segments already durable)", 200)
	if took > time.Second || written > 10<<20 {
		t.Errorf("snapshot of %d MiB: %s and %d bytes written; want under 1 s and 10 MB", mb, took, written)
	}

	// The broker appends after the snapshot; a restart restores it.
	for _, seg := range actives {
		appendFile(t, seg, "after the snapshot")
	}
	_, m := openManifest(t, store, id)
	t0 := time.Now()
	st, err := restoreFromLinks(state, store.filesDir(id), m)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restore: %s, %+v", time.Since(t0).Round(time.Microsecond), st)
	if st.truncated != len(actives) {
		t.Errorf("restore truncated %d segments, want the %d active ones", st.truncated, len(actives))
	}
}

// procIO reads this process's /proc/self/io counters.
func procIO(t *testing.T) map[string]int64 {
	t.Helper()
	f, err := os.Open("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if ok {
			out[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return out
}

func lastLine(s, substr string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], substr) {
			return lines[i]
		}
	}
	return ""
}
