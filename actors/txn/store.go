package txn

// The store: the coordinator's record log, DataDir/txn/txn.log, a
// storage/recordlog log in its LayoutKey16 frames (unchanged from the
// store's own format before recordlog, so old files read as they are):
//
//	length u32 (of what follows) | crc32c u32 (of the body) |
//	body: idLen u16 | transactional id | record value (record.go)
//
// An empty value (Dead) forgets the id; the empty id holds the
// coordinator epoch (epoch.go). Every state change is written
// with one write(2) before it is answered (fsynced too when the store is
// opened with fsync), so a kill -9 loses nothing answered. Opening keeps
// the last frame of every id and truncates a cut tail; recordlog compacts
// the file to the live frames when it has grown to twice them.

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage/recordlog"
)

const (
	storeLog = "txn.log"
	// storeTmp is recordlog's compaction file beside the log.
	storeTmp = storeLog + ".tmp"
	// maxStoreBody bounds a frame's length field.
	maxStoreBody = 16 << 20
	// rewriteFloor: the log is not compacted below this size.
	rewriteFloor = 4 << 20
)

// Store is the coordinator's record log. Safe for concurrent use (the
// log's own lock guards it).
type Store struct {
	log    *recordlog.Log
	logger *slog.Logger

	// epochMu orders epoch bumps (Apply) with readers; epoch is the
	// coordinator epoch in the log (noEpoch: none yet).
	epochMu sync.Mutex
	epoch   int32
}

// OpenStore opens (creating) the log under dir and replays it, returning
// every live transactional id's state.
func OpenStore(dir string, fsync bool, logger *slog.Logger) (*Store, map[string]*Txn, error) {
	return openStore(dir, fsync, logger, rewriteFloor)
}

func openStore(dir string, fsync bool, logger *slog.Logger, floor int64) (*Store, map[string]*Txn, error) {
	if logger == nil {
		logger = slog.Default()
	}
	l, err := recordlog.Open(filepath.Join(dir, storeLog), recordlog.Options{
		Layout:          recordlog.LayoutKey16,
		MaxFrameBytes:   maxStoreBody,
		Fsync:           fsync,
		CompactMinBytes: floor,
		Logger:          logger,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("open txn log: %w", err)
	}
	s := &Store{log: l, logger: logger, epoch: noEpoch}
	var bad error
	s.log.Range(func(r recordlog.Record) bool {
		if string(r.Key) != epochKey {
			return true
		}
		s.epoch, bad = decodeEpoch(r.Value)
		return false
	})
	if bad != nil {
		// Serving below the epoch that markers already carried would
		// have partitions refuse every marker as a stale coordinator's.
		_ = l.Close()
		return nil, nil, fmt.Errorf("open txn log: %w", bad)
	}
	return s, s.Txns(), nil
}

// Txns returns every live transactional id's state: what OpenStore
// returned, plus everything applied since. A standby coordinator loads
// its transactions from here when it activates.
func (s *Store) Txns() map[string]*Txn {
	out := map[string]*Txn{}
	s.log.Range(func(r recordlog.Record) bool {
		id := string(r.Key)
		if id == epochKey {
			return true
		}
		t, err := decodeTxn(id, r.Value)
		if err != nil {
			// A frame with a good CRC that we cannot read: written by
			// a newer version. Keep it, serve without it.
			s.logger.Warn("skipping unreadable transaction record", "transactional_id", id, "err", err)
			return true
		}
		out[id] = t
		return true
	})
	return out
}

// readStoreFrame reads the frame at raw[pos:].
func readStoreFrame(raw []byte, pos int64) (id string, value []byte, next int64, ok bool) {
	if pos < 0 || pos > int64(len(raw)) {
		return "", nil, pos, false
	}
	r, n, err := recordlog.LayoutKey16.ReadFrame(raw[pos:], maxStoreBody)
	if err != nil {
		return "", nil, pos, false
	}
	return string(r.Key), r.Value, pos + int64(n), true
}

// appendStoreFrame appends id's frame (an empty value: a tombstone).
func appendStoreFrame(dst []byte, id string, value []byte) []byte {
	return recordlog.LayoutKey16.AppendFrame(dst, []byte(id), value, len(value) == 0)
}

// Put writes t as id's state (Dead: forgets the id). When it returns nil
// the record is in the OS (on disk with fsync). On error nothing may be
// assumed about what was written, and the store refuses further writes.
func (s *Store) Put(t *Txn) error {
	c, err := newPutCmd(t)
	if err != nil {
		return err
	}
	return s.write(c)
}

// write appends c's frame, verbatim, in one write.
func (s *Store) write(c *putCmd) error {
	b := s.log.NewBatch()
	if err := b.AppendFrames(c.frame); err != nil {
		return fmt.Errorf("txn log: %w", err)
	}
	if err := s.log.Write(b); err != nil {
		// The disk's refusal, this node's alone (a malformed frame
		// above is every node's).
		return replication.MarkLocal(fmt.Errorf("txn log: %w", err))
	}
	return nil
}

// Apply implements replication.Applier: it writes a putCmd and returns the
// error, if any, as the result. It is safe from any goroutine (the raft
// FSM's, while others read the store) and deterministic: the command's
// frame is written as it came, so every node's log holds the same bytes.
// (Which raft index the store holds is the cluster's snapshot manifest's
// to say: the whole state directory is restored to a snapshot's index.)
//
// An epochCmd raises the coordinator epoch by one and returns the new
// epoch (an int32).
func (s *Store) Apply(cmd replication.Command) any {
	switch c := cmd.(type) {
	case *putCmd:
		if err := s.write(c); err != nil {
			return err
		}
		return nil
	case epochCmd:
		return s.raiseEpoch()
	default:
		return fmt.Errorf("txn store: unknown command %T", cmd)
	}
}

// raiseEpoch writes the next coordinator epoch and returns it (int32), or
// the write's error (the epoch is then unchanged in memory; the store
// refuses further writes anyway).
func (s *Store) raiseEpoch() any {
	s.epochMu.Lock()
	defer s.epochMu.Unlock()
	next := s.epoch + 1
	if next < 0 {
		return fmt.Errorf("txn store: coordinator epoch %d cannot rise", s.epoch)
	}
	b := s.log.NewBatch()
	b.Put([]byte(epochKey), encodeEpoch(next))
	if err := s.log.Write(b); err != nil {
		return replication.MarkLocal(fmt.Errorf("txn log: coordinator epoch: %w", err))
	}
	s.epoch = next
	return next
}

// CoordinatorEpoch is the stored coordinator epoch (-1: never raised).
func (s *Store) CoordinatorEpoch() int32 {
	s.epochMu.Lock()
	defer s.epochMu.Unlock()
	return s.epoch
}

// Sync fsyncs the log (the broker's flush interval).
func (s *Store) Sync() error { return s.log.Sync() }

// Size is the log's size in bytes (tests, metrics).
func (s *Store) Size() int64 { return s.log.Size() }

// Close fsyncs and closes the log.
func (s *Store) Close() error { return s.log.Close() }
