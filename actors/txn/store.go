package txn

// The store: one append-only record log, DataDir/txn/txn.log, of frames
//
//	length u32 (of what follows) | crc32c u32 (of the body) |
//	body: idLen u16 | transactional id | record value (record.go)
//
// Every state change is written with one write(2) before it is answered
// (fsynced too when the store is opened with fsync), so a kill -9 loses
// nothing answered. Replay keeps the last frame of every id, stops at the
// first torn or corrupt frame and truncates the file there. When the log
// is more than twice its live content (and past a floor) it is rewritten
// to the live frames: written aside, fsynced, renamed over the log.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/regent-broker/regent/cluster"
)

const (
	storeLog     = "txn.log"
	storeTmp     = "txn.log.tmp"
	storeHeader  = 8 // length + crc
	maxStoreBody = 16 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Store is the coordinator's record log. Safe for concurrent use.
type Store struct {
	dir    string
	fsync  bool
	logger *slog.Logger
	// rewriteFloor: the log is not rewritten below this size.
	rewriteFloor int64

	mu struct {
		sync.Mutex
		f    *os.File
		size int64
		// live is the last frame of every live id: what a rewrite keeps.
		live      map[string][]byte
		liveBytes int64
		// broken is set when a write failed part-way: nothing more is
		// appended after a torn frame.
		broken error
	}
}

// OpenStore opens (creating) the log under dir and replays it, returning
// every live transactional id's state.
func OpenStore(dir string, fsync bool, logger *slog.Logger) (*Store, map[string]*Txn, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("create txn dir: %w", err)
	}
	// An unrenamed rewrite is incomplete; the log beside it is intact.
	if err := os.Remove(filepath.Join(dir, storeTmp)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("remove stale txn log rewrite: %w", err)
	}
	s := &Store{dir: dir, fsync: fsync, logger: logger, rewriteFloor: 4 << 20}
	s.mu.live = map[string][]byte{}
	path := filepath.Join(dir, storeLog)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open txn log: %w", err)
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("read txn log: %w", err)
	}
	good, txns := s.replay(raw)
	if good < int64(len(raw)) {
		logger.Warn("txn log has a torn or corrupt tail; truncating", "path", path, "valid_bytes", good, "file_bytes", len(raw))
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("truncate txn log: %w", err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("seek txn log: %w", err)
	}
	s.mu.f, s.mu.size = f, good
	return s, txns, nil
}

// replay reads frames until the first bad one and returns how many bytes
// were good and the live states.
func (s *Store) replay(raw []byte) (int64, map[string]*Txn) {
	var pos int64
	for {
		id, value, next, ok := readStoreFrame(raw, pos)
		if !ok {
			break
		}
		s.index(id, slices.Clone(raw[pos:next]), len(value) == 0)
		pos = next
	}
	return pos, s.txnsLocked()
}

// Txns returns every live transactional id's state: what OpenStore
// returned, plus everything applied since. A standby coordinator loads
// its transactions from here when it activates.
func (s *Store) Txns() map[string]*Txn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.txnsLocked()
}

func (s *Store) txnsLocked() map[string]*Txn {
	out := make(map[string]*Txn, len(s.mu.live))
	for id, frame := range s.mu.live {
		_, value, _, _ := readStoreFrame(frame, 0)
		t, err := decodeTxn(id, value)
		if err != nil {
			// A frame with a good CRC that we cannot read: written by
			// a newer version. Keep it, serve without it.
			s.logger.Warn("skipping unreadable transaction record", "transactional_id", id, "err", err)
			continue
		}
		out[id] = t
	}
	return out
}

func readStoreFrame(raw []byte, pos int64) (id string, value []byte, next int64, ok bool) {
	if int64(len(raw))-pos < storeHeader {
		return "", nil, pos, false
	}
	n := int64(binary.BigEndian.Uint32(raw[pos:]))
	if n < 4+2 || n > maxStoreBody || pos+4+n > int64(len(raw)) {
		return "", nil, pos, false
	}
	body := raw[pos+storeHeader : pos+4+n]
	if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(raw[pos+4:]) {
		return "", nil, pos, false
	}
	idLen := int(binary.BigEndian.Uint16(body))
	if 2+idLen > len(body) {
		return "", nil, pos, false
	}
	return string(body[2 : 2+idLen]), body[2+idLen:], pos + 4 + n, true
}

func appendStoreFrame(dst []byte, id string, value []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = appendString(dst, id)
	dst = append(dst, value...)
	body := dst[start+storeHeader:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)+4))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, crcTable))
	return dst
}

// index makes frame the live frame of id, or forgets id. Called with mu
// held, or during replay before the store is shared.
func (s *Store) index(id string, frame []byte, tombstone bool) {
	if old, ok := s.mu.live[id]; ok {
		s.mu.liveBytes -= int64(len(old))
		delete(s.mu.live, id)
	}
	if !tombstone {
		s.mu.live[id] = frame
		s.mu.liveBytes += int64(len(frame))
	}
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

// write appends c's frame and makes it id's live frame (or forgets id).
// The store keeps c.frame: nobody may modify it.
func (s *Store) write(c *putCmd) error {
	frame := c.frame
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.broken != nil {
		return fmt.Errorf("txn log unusable after an earlier error: %w", s.mu.broken)
	}
	if s.mu.f == nil {
		return errors.New("txn log is closed")
	}
	if _, err := s.mu.f.Write(frame); err != nil {
		s.mu.broken = err
		return fmt.Errorf("write txn log: %w", err)
	}
	if s.fsync {
		if err := s.mu.f.Sync(); err != nil {
			s.mu.broken = err
			return fmt.Errorf("fsync txn log: %w", err)
		}
	}
	s.mu.size += int64(len(frame))
	s.index(c.id, frame, c.dead)
	if s.mu.size > s.rewriteFloor && s.mu.size > 2*s.mu.liveBytes {
		if err := s.rewriteLocked(); err != nil {
			// The old log is intact; a later write tries again.
			s.logger.Error("rewrite txn log", "err", err)
		}
	}
	return nil
}

// rewriteLocked replaces the log with its live frames.
func (s *Store) rewriteLocked() error {
	tmp := filepath.Join(s.dir, storeTmp)
	ids := make([]string, 0, len(s.mu.live))
	for id := range s.mu.live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	buf := make([]byte, 0, s.mu.liveBytes)
	for _, id := range ids {
		buf = append(buf, s.mu.live[id]...)
	}
	if err := writeSynced(tmp, buf); err != nil {
		os.Remove(tmp)
		return err
	}
	path := filepath.Join(s.dir, storeLog)
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename txn log rewrite: %w", err)
	}
	if d, err := os.Open(s.dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	nf, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		// The rewrite is in place but cannot be appended to.
		s.mu.broken = err
		return fmt.Errorf("reopen txn log: %w", err)
	}
	s.mu.f.Close()
	s.mu.f, s.mu.size = nf, int64(len(buf))
	s.logger.Debug("rewrote txn log", "bytes", len(buf), "ids", len(ids))
	return nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return f.Close()
}

// Apply implements cluster.Applier: it writes a putCmd and returns the
// error, if any, as the result. It is safe from any goroutine (the raft
// FSM's, while others read the store) and deterministic: the command's
// frame is written as it came, so every node's log holds the same bytes.
func (s *Store) Apply(cmd cluster.Command) any {
	c, ok := cmd.(*putCmd)
	if !ok {
		return fmt.Errorf("txn store: unknown command %T", cmd)
	}
	if err := s.write(c); err != nil {
		return err
	}
	return nil
}

// Sync fsyncs the log (the broker's flush interval).
func (s *Store) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.f == nil {
		return nil
	}
	return s.mu.f.Sync()
}

// Size is the log's size in bytes (tests, metrics).
func (s *Store) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.size
}

// Close fsyncs and closes the log.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.f == nil {
		return nil
	}
	err := s.mu.f.Sync()
	if cerr := s.mu.f.Close(); err == nil {
		err = cerr
	}
	s.mu.f = nil
	return err
}
