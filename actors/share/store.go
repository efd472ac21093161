package share

// The store: DataDir/share/share.log, a storage/recordlog log in its
// LayoutKey16 frames, one live record per share-partition (durable.go
// says what it holds and when it is written). A replicated putCmd carries
// the frames it writes, so every node's log holds the same bytes; the
// log compacts itself to the live records.

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage/recordlog"
)

const (
	storeLog = "share.log"
	// maxStoreBody bounds a frame: a window of 2000 single-record spans
	// is some 10 KB; the bound leaves room for raised lock limits.
	maxStoreBody = 16 << 20
	rewriteFloor = 4 << 20
	// replKey is the replicator key of the store.
	replKey = "share"
	putKind = "share.put"
)

func init() { replication.RegisterDecoder(putKind, decodePutCmd) }

// Store is the share-partitions' record log. Safe for concurrent use (the
// log's own lock guards it).
type Store struct {
	log    *recordlog.Log
	logger *slog.Logger
}

// OpenStore opens (creating) the log under dir.
func OpenStore(dir string, fsync bool, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.Default()
	}
	l, err := recordlog.Open(filepath.Join(dir, storeLog), recordlog.Options{
		Layout:          recordlog.LayoutKey16,
		MaxFrameBytes:   maxStoreBody,
		Fsync:           fsync,
		CompactMinBytes: rewriteFloor,
		Logger:          logger,
	})
	if err != nil {
		return nil, fmt.Errorf("open share-partition log: %w", err)
	}
	return &Store{log: l, logger: logger}, nil
}

// States returns every stored share-partition's state. A record that
// does not decode (a newer version's) is logged and skipped.
func (s *Store) States() map[partKey]*State {
	out := map[partKey]*State{}
	s.log.Range(func(r recordlog.Record) bool {
		k, err := decodeKey(r.Key)
		if err == nil {
			var st *State
			if st, err = decodeState(r.Value); err == nil {
				out[k] = st
				return true
			}
		}
		s.logger.Warn("skipping unreadable share-partition record", "err", err)
		return true
	})
	return out
}

// putCmd is the replicated command: share-partitions' new durable states
// (an empty value forgets one), as the store frames they are written as.
type putCmd struct{ frames []byte }

func (c *putCmd) CommandKind() string           { return putKind }
func (c *putCmd) AppendCommand(b []byte) []byte { return append(b, c.frames...) }
func (c *putCmd) CommandSize() int              { return len(c.frames) }

// appendPutFrame appends k's frame carrying v (empty: forget k); the
// caller has checked k (checkKeyLens).
func appendPutFrame(frames []byte, k partKey, v []byte) []byte {
	return recordlog.LayoutKey16.AppendFrame(frames, encodeKey(k), v, len(v) == 0)
}

// decodePutCmd is putCmd's replication.Decoder: it refuses frames the
// store could not load back.
func decodePutCmd(payload []byte) (replication.Command, error) {
	frames := bytes.Clone(payload)
	for pos := 0; pos < len(frames); {
		r, n, err := recordlog.LayoutKey16.ReadFrame(frames[pos:], maxStoreBody)
		if err != nil {
			return nil, fmt.Errorf("share-partition frame at %d: %w", pos, err)
		}
		if _, err := decodeKey(r.Key); err != nil {
			return nil, err
		}
		if len(r.Value) > 0 {
			if _, err := decodeState(r.Value); err != nil {
				return nil, err
			}
		}
		pos += n
	}
	return &putCmd{frames: frames}, nil
}

// Apply implements replication.Applier: it writes a putCmd's frames in
// one write and returns the error, if any. Any goroutine; deterministic.
func (s *Store) Apply(cmd replication.Command) any {
	c, ok := cmd.(*putCmd)
	if !ok {
		return fmt.Errorf("share store: unknown command %T", cmd)
	}
	b := s.log.NewBatch()
	if err := b.AppendFrames(c.frames); err != nil {
		return fmt.Errorf("share-partition log: %w", err)
	}
	if err := s.log.Write(b); err != nil {
		return replication.MarkLocal(fmt.Errorf("share-partition log: %w", err))
	}
	return nil
}

// Sync fsyncs the log (the broker's flush interval).
func (s *Store) Sync() error { return s.log.Sync() }

// Close fsyncs and closes the log.
func (s *Store) Close() error { return s.log.Close() }

var errClosed = errors.New("share-partition manager is closed")
