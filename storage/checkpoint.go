package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/regent-broker/regent/storage/atomicfile"
)

// Small state files kept beside the segments. All use Kafka's checkpoint
// text shape: a version line, then data lines.
const (
	startOffsetFile   = "log-start-offset-checkpoint"
	cleanerFile       = "cleaner-offset-checkpoint"
	epochFile         = "leader-epoch-checkpoint"
	cleanShutdownFile = ".clean-shutdown"
	tmpSuffix         = ".tmp" // atomicfile.Write's temporary files
	checkpointVersion = "0"
)

// writeFileAtomic replaces dir/name so that a crash leaves either the old or
// the new content (atomicfile.Write: temp file, fsync, rename, fsync the
// directory; at most 16 such writes at once in the process, which bounds
// the descriptors thousands of partitions' checkpoints hold).
func writeFileAtomic(dir, name string, data []byte) error {
	if err := atomicfile.Write(filepath.Join(dir, name), data); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// readCheckpoint returns the data lines of a checkpoint file, or nil if it
// does not exist.
func readCheckpoint(dir, name string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != checkpointVersion {
		return nil, fmt.Errorf("%s: unknown checkpoint version", name)
	}
	return lines[1:], nil
}

func writeOffsetCheckpoint(dir, name string, off int64) error {
	return writeFileAtomic(dir, name, fmt.Appendf(nil, "%s\n%d\n", checkpointVersion, off))
}

// readOffsetCheckpoint returns the offset stored in name, or -1 if absent.
func readOffsetCheckpoint(dir, name string) (int64, error) {
	lines, err := readCheckpoint(dir, name)
	if err != nil || lines == nil {
		return -1, err
	}
	if len(lines) != 1 {
		return -1, fmt.Errorf("%s: want one offset line, have %d", name, len(lines))
	}
	off, err := strconv.ParseInt(strings.TrimSpace(lines[0]), 10, 64)
	if err != nil || off < 0 {
		return -1, fmt.Errorf("%s: bad offset %q", name, lines[0])
	}
	return off, nil
}
