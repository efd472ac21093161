package storage

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Leader epoch cache (Kafka's LeaderEpochFileCache): for each leader epoch,
// the first offset written in it. Persisted as leader-epoch-checkpoint in
// Kafka's text format: version, entry count, then "epoch startOffset" lines.

type epochEntry struct {
	epoch int32
	start int64
}

// AssignEpoch records that epoch starts at startOffset (owner). As in Kafka,
// re-assigning the latest epoch at a later offset is a no-op, and entries
// that conflict with the new one (an epoch >= it, or a start offset >= it)
// are removed first.
func (l *Log) AssignEpoch(epoch int32, startOffset int64) error {
	if epoch < 0 || startOffset < 0 {
		return fmt.Errorf("assign epoch %d at %d: negative", epoch, startOffset)
	}
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	old := l.mu.epochs
	if n := len(old); n > 0 && old[n-1].epoch == epoch && old[n-1].start <= startOffset {
		l.mu.Unlock()
		return nil
	}
	next := slices.DeleteFunc(slices.Clone(old), func(e epochEntry) bool {
		return e.epoch >= epoch || e.start >= startOffset
	})
	next = append(next, epochEntry{epoch: epoch, start: startOffset})
	l.mu.epochs = next
	l.mu.Unlock()
	return l.persistEpochs(next)
}

// LatestEpoch returns the newest epoch in the cache, or -1.
func (l *Log) LatestEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if n := len(l.mu.epochs); n > 0 {
		return l.mu.epochs[n-1].epoch
	}
	return -1
}

// EpochAt returns the leader epoch of the record at offset: the newest
// epoch that starts at or before it (-1 if none does). ListOffsets answers
// it with the offset it found, and a consumer validates its position with
// it after a leader change.
func (l *Log) EpochAt(offset int64) int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	es := l.mu.epochs
	i := sort.Search(len(es), func(i int) bool { return es[i].start > offset })
	if i == 0 {
		return -1
	}
	return es[i-1].epoch
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch the way Kafka's
// LeaderEpochFileCache.endOffsetFor does:
//   - requested == latest epoch: (epoch, log end offset);
//   - requested older than some known epoch: the largest known epoch <=
//     requested (or requested itself if none is smaller) and the start
//     offset of the first epoch after it;
//   - requested newer than every known epoch, or undefined (-1), or an empty
//     cache: (-1, -1).
func (l *Log) EndOffsetForEpoch(epoch int32) (leaderEpoch int32, endOffset int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	es := l.mu.epochs
	if epoch < 0 || len(es) == 0 {
		return -1, -1
	}
	if es[len(es)-1].epoch == epoch {
		return epoch, l.mu.next
	}
	// First entry with a higher epoch.
	i := sort.Search(len(es), func(i int) bool { return es[i].epoch > epoch })
	if i == len(es) {
		return -1, -1
	}
	if i == 0 {
		return epoch, es[0].start
	}
	return es[i-1].epoch, es[i].start
}

// truncateEpochsFromEnd drops entries starting at or after end (Truncate).
func truncateEpochsFromEnd(es []epochEntry, end int64) []epochEntry {
	i := len(es)
	for i > 0 && es[i-1].start >= end {
		i--
	}
	if i == len(es) {
		return es
	}
	return slices.Clone(es[:i])
}

// truncateEpochsFromStart drops entries wholly below start, moving the last
// of them up to start (Kafka's truncateFromStart).
func truncateEpochsFromStart(es []epochEntry, start int64) []epochEntry {
	i := 0
	for i < len(es) && es[i].start <= start {
		i++
	}
	if i == 0 || (i == 1 && es[0].start == start) {
		return es
	}
	out := append([]epochEntry{{epoch: es[i-1].epoch, start: start}}, es[i:]...)
	return out
}

func encodeEpochs(es []epochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n%d\n", checkpointVersion, len(es))
	for _, e := range es {
		fmt.Fprintf(&b, "%d %d\n", e.epoch, e.start)
	}
	return b.Bytes()
}

func (l *Log) persistEpochs(es []epochEntry) error {
	l.persistMu.Lock()
	defer l.persistMu.Unlock()
	return writeFileAtomic(l.dir, epochFile, encodeEpochs(es))
}

// persistEpochsIfChanged rewrites the checkpoint when recovery clamped the
// loaded entries.
func (l *Log) persistEpochsIfChanged(loaded []epochEntry) error {
	if slices.Equal(loaded, l.mu.epochs) {
		return nil
	}
	return l.persistEpochs(l.mu.epochs)
}

func readEpochs(dir string) ([]epochEntry, error) {
	lines, err := readCheckpoint(dir, epochFile)
	if err != nil || lines == nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || n != len(lines)-1 {
		return nil, fmt.Errorf("%s: bad entry count %q", epochFile, lines[0])
	}
	es := make([]epochEntry, 0, n)
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s: bad line %q", epochFile, line)
		}
		ep, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || ep < 0 || off < 0 ||
			(len(es) > 0 && (int32(ep) <= es[len(es)-1].epoch || off < es[len(es)-1].start)) {
			return nil, fmt.Errorf("%s: bad line %q", epochFile, line)
		}
		es = append(es, epochEntry{epoch: int32(ep), start: off})
	}
	return es, nil
}
