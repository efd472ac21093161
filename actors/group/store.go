package group

// The store: one append-only record log for the coordinator,
// DataDir/groups/groups.log. Each frame is
//
//	length uint32 (of what follows) | crc32c uint32 (of the body) |
//	body: keyLen uint32 | key | valueLen int32 (-1: tombstone) | value
//
// Appends are written with one write(2) before the caller answers (so a
// kill -9 loses nothing answered); fsync is the broker's policy. Replay
// stops at the first torn or corrupt frame and truncates there. When the
// log has grown to twice its live content it is rewritten to a snapshot of
// the live records (written aside, fsynced, renamed over the log).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/regent-broker/regent/cluster"
)

const (
	logName = "groups.log"
	tmpName = "groups.log.tmp"
	// frameHeader is length + crc.
	frameHeader = 8
	// maxFrame bounds a frame on replay (a group of many members with
	// large subscriptions is the biggest record).
	maxFrame = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Store is the coordinator's record log. Safe for concurrent use.
type Store struct {
	dir    string
	fsync  bool
	logger *slog.Logger
	// compactMin: the log is not rewritten below this size.
	compactMin int64

	mu struct {
		sync.Mutex
		f    *os.File
		size int64
		// live is the last frame of every live key, by group: what a
		// snapshot keeps.
		live      map[string]map[string][]byte
		liveBytes int64
		broken    error // set when a write failed part-way
	}
}

// OpenStore opens (creating) the log under dir and replays it, returning
// every group's live records in log order.
func OpenStore(dir string, fsync bool, logger *slog.Logger) (*Store, map[string][]Record, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("create groups dir: %w", err)
	}
	// A snapshot that was not renamed into place is incomplete: the log
	// beside it is intact.
	if err := os.Remove(filepath.Join(dir, tmpName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("remove stale snapshot: %w", err)
	}
	s := &Store{dir: dir, fsync: fsync, logger: logger, compactMin: 8 << 20}
	s.mu.live = map[string]map[string][]byte{}
	path := filepath.Join(dir, logName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open group log: %w", err)
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("read group log: %w", err)
	}
	good, recs := s.replay(raw)
	if good < int64(len(raw)) {
		logger.Warn("group log has a torn or corrupt tail; truncating", "path", path, "valid_bytes", good, "file_bytes", len(raw))
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("truncate group log: %w", err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("seek group log: %w", err)
	}
	s.mu.f, s.mu.size = f, good
	return s, recs, nil
}

// replay reads frames until the first bad one, returning how many bytes
// were good and the live records by group.
func (s *Store) replay(raw []byte) (int64, map[string][]Record) {
	var pos int64
	for {
		body, next, ok := readFrame(raw, pos)
		if !ok {
			break
		}
		key, value, ok := splitBody(body)
		if !ok {
			break
		}
		r, err := decodeRecord(key, value)
		if err != nil {
			// A frame with a good CRC that we cannot read: written by a
			// newer version. Keep going; it is not ours to drop.
			s.logger.Warn("skipping unreadable group record", "offset", pos, "err", err)
			pos = next
			continue
		}
		// Copy: holding slices of raw would keep the whole file in memory.
		s.index(&r, bytes.Clone(raw[pos:next]))
		pos = next
	}
	return pos, s.groupsLocked()
}

// Groups returns every group's live records, in the order that rebuilds
// the group (what OpenStore returned, plus everything applied since). A
// standby coordinator loads its groups from here when it activates.
func (s *Store) Groups() map[string][]Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.groupsLocked()
}

func (s *Store) groupsLocked() map[string][]Record {
	out := make(map[string][]Record, len(s.mu.live))
	for group, keys := range s.mu.live {
		for _, frame := range sortedFrames(keys) {
			key, value, _ := splitBody(frame[frameHeader:])
			if r, err := decodeRecord(key, value); err == nil {
				out[group] = append(out[group], r)
			}
		}
	}
	return out
}

// sortedFrames orders a group's frames: group state first, then offsets,
// so that restoring in this order rebuilds the group.
func sortedFrames(keys map[string][]byte) [][]byte {
	ks := make([]string, 0, len(keys))
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if (ks[i][0] == 'o') != (ks[j][0] == 'o') {
			return ks[j][0] == 'o'
		}
		return ks[i] < ks[j]
	})
	out := make([][]byte, len(ks))
	for i, k := range ks {
		out[i] = keys[k]
	}
	return out
}

func readFrame(raw []byte, pos int64) (body []byte, next int64, ok bool) {
	if int64(len(raw))-pos < frameHeader {
		return nil, pos, false
	}
	n := int64(binary.BigEndian.Uint32(raw[pos:]))
	if n < 4 || n > maxFrame || pos+4+n > int64(len(raw)) {
		return nil, pos, false
	}
	crc := binary.BigEndian.Uint32(raw[pos+4:])
	body = raw[pos+frameHeader : pos+4+n]
	if crc32.Checksum(body, castagnoli) != crc {
		return nil, pos, false
	}
	return body, pos + 4 + n, true
}

func splitBody(body []byte) (key, value []byte, ok bool) {
	if len(body) < 8 {
		return nil, nil, false
	}
	kl := int(binary.BigEndian.Uint32(body))
	if kl > len(body)-8 {
		return nil, nil, false
	}
	key = body[4 : 4+kl]
	rest := body[4+kl:]
	vl := int32(binary.BigEndian.Uint32(rest))
	rest = rest[4:]
	if vl < 0 {
		return key, nil, len(rest) == 0
	}
	if int(vl) != len(rest) {
		return nil, nil, false
	}
	return key, rest, true
}

func appendFrame(dst []byte, r *Record) []byte {
	key, value := r.encode()
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(key)))
	dst = append(dst, key...)
	if value == nil {
		dst = binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
	} else {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(value)))
		dst = append(dst, value...)
	}
	body := dst[start+frameHeader:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)+4))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
	return dst
}

// index records frame as the live value of r's key (or forgets the key).
// Called with mu held (or during replay, before the store is shared).
func (s *Store) index(r *Record, frame []byte) {
	keys := s.mu.live[r.Group]
	if r.Kind == RecGroupTombstone {
		// A group tombstone ends everything the group had.
		for _, f := range keys {
			s.mu.liveBytes -= int64(len(f))
		}
		delete(s.mu.live, r.Group)
		return
	}
	k := r.storeKey()
	if old, ok := keys[k]; ok {
		s.mu.liveBytes -= int64(len(old))
		delete(keys, k)
	}
	if r.tombstone() {
		if len(keys) == 0 {
			delete(s.mu.live, r.Group)
		}
		return
	}
	if keys == nil {
		keys = map[string][]byte{}
		s.mu.live[r.Group] = keys
	}
	keys[k] = frame
	s.mu.liveBytes += int64(len(frame))
}

// Append writes records to the log: when it returns nil they are in the
// OS (and on disk if the store fsyncs). On error nothing may be assumed
// about which were written; the store refuses further appends until it is
// reopened, so that a half-written frame is never followed by good ones.
func (s *Store) Append(recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	var buf []byte
	bounds := make([]int, 0, len(recs)+1)
	for i := range recs {
		bounds = append(bounds, len(buf))
		buf = appendFrame(buf, &recs[i])
	}
	bounds = append(bounds, len(buf))
	return s.write(recs, buf, bounds)
}

// write appends recs, already framed in buf (record i is
// buf[bounds[i]:bounds[i+1]]). The store keeps slices of buf: the caller
// must not reuse it.
func (s *Store) write(recs []Record, buf []byte, bounds []int) error {
	if len(recs) == 0 {
		return nil
	}
	if len(bounds) != len(recs)+1 || bounds[len(recs)] != len(buf) {
		return fmt.Errorf("group log: %d records framed in %d bounds over %d bytes", len(recs), len(bounds), len(buf))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.broken != nil {
		return fmt.Errorf("group log unusable after an earlier error: %w", s.mu.broken)
	}
	if s.mu.f == nil {
		return errors.New("group log is closed")
	}
	if _, err := s.mu.f.Write(buf); err != nil {
		s.mu.broken = err
		return fmt.Errorf("write group log: %w", err)
	}
	if s.fsync {
		if err := s.mu.f.Sync(); err != nil {
			s.mu.broken = err
			return fmt.Errorf("fsync group log: %w", err)
		}
	}
	s.mu.size += int64(len(buf))
	for i := range recs {
		s.index(&recs[i], buf[bounds[i]:bounds[i+1]])
	}
	if s.mu.size > s.compactMin && s.mu.size > 2*s.mu.liveBytes {
		if err := s.compactLocked(); err != nil {
			// The old log is intact; try again on a later append.
			s.logger.Error("compact group log", "err", err)
		}
	}
	return nil
}

// compactLocked rewrites the log to its live frames.
func (s *Store) compactLocked() error {
	tmp := filepath.Join(s.dir, tmpName)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	var buf []byte
	groups := make([]string, 0, len(s.mu.live))
	for g := range s.mu.live {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	var size int64
	for _, g := range groups {
		for _, frame := range sortedFrames(s.mu.live[g]) {
			buf = append(buf, frame...)
			if len(buf) >= 1<<20 {
				if _, err := f.Write(buf); err != nil {
					f.Close()
					os.Remove(tmp)
					return err
				}
				size += int64(len(buf))
				buf = buf[:0]
			}
		}
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	size += int64(len(buf))
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	path := filepath.Join(s.dir, logName)
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	syncDir(s.dir)
	nf, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		// The snapshot is in place but we cannot append to it.
		s.mu.broken = err
		return err
	}
	s.mu.f.Close()
	s.mu.f, s.mu.size = nf, size
	// The frames in live alias the old buffers; they are still valid
	// copies of what the new file holds.
	s.logger.Debug("compacted group log", "bytes", size)
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// GroupRecords returns a group's live records (to rebuild its state).
func (s *Store) GroupRecords(group string) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Record
	for _, frame := range sortedFrames(s.mu.live[group]) {
		key, value, _ := splitBody(frame[frameHeader:])
		if r, err := decodeRecord(key, value); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// Apply implements cluster.Applier: it persists a persistCmd's records and
// returns the error, if any, as the result. It is safe from any goroutine
// (the raft FSM's, while others read the store) and deterministic: a
// decoded command's frames are written as they came, so every node's log
// holds the same bytes and indexes the same live records.
func (s *Store) Apply(cmd cluster.Command) any {
	c, ok := cmd.(*persistCmd)
	if !ok {
		return fmt.Errorf("group store: unknown command %T", cmd)
	}
	var err error
	if c.frames != nil {
		err = s.write(c.recs, c.frames, c.bounds)
	} else {
		err = s.Append(c.recs)
	}
	if err != nil {
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

// Size is the log's current size in bytes (for tests and metrics).
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
