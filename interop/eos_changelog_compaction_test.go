package interop_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// changelogSample is the changelog partition's directory at one moment.
type changelogSample struct {
	at       time.Duration // since the directory appeared
	logBytes int64         // segment .log files
	allBytes int64         // every file (indexes, checkpoints)
	segments int
}

func sampleDir(dir string) (changelogSample, bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return changelogSample{}, false
	}
	var s changelogSample
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || info.IsDir() {
			continue // a file a pass just swapped out
		}
		s.allBytes += info.Size()
		if strings.HasSuffix(e.Name(), ".log") {
			s.logBytes += info.Size()
			s.segments++
		}
	}
	return s, true
}

// TestEOSChangelogCompaction: a Kafka Streams exactly_once_v2 application
// keeps a KTable over 100 keys under 1000 updates a second for 90 s; its
// changelog (compacted, a segment a second, delete.retention.ms 2 s) is
// written in transactions, several a second, so without compaction of
// transactional data it would keep every update and every COMMIT marker.
// Sampled every 2 s from the broker's data directory, the changelog's
// segment files stay below 64 x keys x record size once compaction has run
// (30 s in), while over four times that bound is written (~8 MB of
// records); a new instance restores the exact store from it
// (StreamsChangelogCompaction's checks); read from disk once the broker
// stops, it holds far fewer COMMIT markers than the application committed
// transactions.
func TestEOSChangelogCompaction(t *testing.T) {
	const (
		appID   = "eos-changelog"
		keys    = 100
		recSize = 128 // key-NNN, "count|" + a 100-byte value, record overhead
		bound   = 64 * keys * recSize
		warmup  = 30 * time.Second
		seconds = 90
	)
	frameworkScenarios(t)
	b := brokertest.Start(t, "--broker-config", "group.initial.rebalance.delay.ms=0", "--retention-check-interval", "500ms")
	dir := filepath.Join(b.Dir, appID+"-agg-changelog-0") // a single node keeps partitions in its data dir
	figures := filepath.Join(t.TempDir(), "figures.txt")

	var (
		mu      sync.Mutex
		samples []changelogSample
	)
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		var appeared time.Time
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			s, ok := sampleDir(dir)
			if !ok {
				continue
			}
			if appeared.IsZero() {
				appeared = time.Now()
			}
			s.at = time.Since(appeared)
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
		}
	}()
	runScenario(t, "kafka", "StreamsChangelogCompaction", b.Addr, 8*time.Minute, appID, fmt.Sprint(seconds), figures)
	close(stop)
	sampler.Wait()

	var (
		table   strings.Builder
		maxLate changelogSample
		late    int
	)
	for _, s := range samples {
		fmt.Fprintf(&table, "%6.0fs %9d %9d %4d\n", s.at.Seconds(), s.logBytes, s.allBytes, s.segments)
		if s.at >= warmup {
			late++
			if s.logBytes > maxLate.logBytes {
				maxLate = s
			}
		}
	}
	t.Logf("changelog on disk (since it appeared; .log bytes, all bytes, segments):\n%s", table.String())
	fig := readFigures(t, figures)
	t.Logf("changelog end offset %d (~%d KiB of records written), %d transactions committed, %d records restored by a new instance; "+
		"after %s: at most %d .log bytes (%d segments), bound %d", fig["end"], fig["end"]*recSize>>10, fig["commits"], fig["restored"],
		warmup, maxLate.logBytes, maxLate.segments, bound)
	if t.Failed() {
		return
	}
	if late < 10 {
		t.Fatalf("%d samples after %s, want at least 10", late, warmup)
	}
	if maxLate.logBytes > bound {
		t.Errorf("changelog reached %d bytes on disk %s after it appeared, above %d (64 x %d keys x %d bytes)",
			maxLate.logBytes, maxLate.at.Round(time.Second), bound, keys, recSize)
	}
	if fig["end"]*recSize < 4*bound {
		t.Errorf("changelog end offset %d: too little written (%d bytes) to show compaction against the %d-byte bound", fig["end"], fig["end"]*recSize, bound)
	}

	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	var records, commits, aborts, empty int
	for _, bt := range readPartitionDir(t, dir) {
		h, err := recordbatch.ParseHeader(bt)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case h.IsControl():
			recs, err := recordbatch.Records(bt)
			if err != nil || len(recs) != 1 || len(recs[0].Key) < 4 {
				t.Fatalf("control batch at %d: %d records, %v", h.BaseOffset, len(recs), err)
			}
			if binary.BigEndian.Uint16(recs[0].Key[2:]) == 1 {
				commits++
			} else {
				aborts++
			}
		case h.NumRecords == 0:
			empty++
		default:
			records += int(h.NumRecords)
		}
	}
	t.Logf("changelog on disk after the run: %d records, %d COMMIT and %d ABORT markers, %d empty batches (of %d committed transactions)",
		records, commits, aborts, empty, fig["commits"])
	if fig["commits"] > 0 && int64(commits) > fig["commits"]/4 {
		t.Errorf("%d COMMIT markers left of %d transactions: markers are not being removed", commits, fig["commits"])
	}
}

// readFigures reads the "name N" lines StreamsChangelogCompaction wrote.
func readFigures(t *testing.T, path string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	f, err := os.Open(path)
	if err != nil {
		t.Logf("no figures from the scenario: %v", err)
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var name string
		var n int64
		if _, err := fmt.Sscanf(sc.Text(), "%s %d", &name, &n); err == nil {
			out[name] = n
		}
	}
	return out
}
