package group

// The store: the coordinator's record log, DataDir/groups/groups.log, a
// storage/recordlog log in its LayoutKV frames (unchanged from the
// store's own format before recordlog, so old files read as they are):
//
//	length uint32 (of what follows) | crc32c uint32 (of the body) |
//	body: keyLen uint32 | key | valueLen int32 (-1: tombstone) | value
//
// Appends are written with one write(2) before the caller answers (so a
// kill -9 loses nothing answered); fsync is the broker's policy. Opening
// truncates a cut tail; recordlog compacts the file to the live records
// when it has grown to twice them. The live records are kept by group
// (groupIndex), because a group tombstone ends every record of its group
// and a group is rebuilt from its own records.

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"

	"github.com/regent-broker/regent/actors/internal/smallmap"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage/recordlog"
)

const (
	logName = "groups.log"
	// tmpName is recordlog's compaction file beside the log.
	tmpName = logName + ".tmp"
	// frameHeader is length + crc.
	frameHeader = 8
	// maxFrame bounds a frame's length field (a group of many members
	// with large subscriptions is the biggest record).
	maxFrame = 64 << 20
	// compactMin: the log is not compacted below this size.
	compactMin = 8 << 20
)

// Store is the coordinator's record log. Safe for concurrent use.
type Store struct {
	log    *recordlog.Log
	logger *slog.Logger

	// mu guards idx and orders writes. Lock order: mu, then the log's
	// own lock (the log calls idx.Add from inside writes made under mu).
	mu struct {
		sync.Mutex
		idx *groupIndex
	}
}

// OpenStore opens (creating) the log under dir and replays it, returning
// every group's live records in the order that rebuilds the group.
func OpenStore(dir string, fsync bool, logger *slog.Logger) (*Store, map[string][]Record, error) {
	return openStore(dir, fsync, logger, compactMin)
}

func openStore(dir string, fsync bool, logger *slog.Logger, compactMinBytes int64) (*Store, map[string][]Record, error) {
	if logger == nil {
		logger = slog.Default()
	}
	idx := &groupIndex{logger: logger, live: map[string]*smallmap.Map[string, recordlog.Record]{}}
	l, err := recordlog.Open(filepath.Join(dir, logName), recordlog.Options{
		Layout:          recordlog.LayoutKV,
		MaxFrameBytes:   maxFrame,
		Fsync:           fsync,
		CompactMinBytes: compactMinBytes,
		Index:           idx,
		Logger:          logger,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("open group log: %w", err)
	}
	s := &Store{log: l, logger: logger}
	s.mu.idx = idx
	return s, idx.groups(), nil
}

// groupIndex is the store's recordlog.Index: every live record, by group
// and by what it supersedes (Record.storeKey), so that a group tombstone
// drops the group's records and a group's records come out in the order
// that rebuilds it.
type groupIndex struct {
	logger *slog.Logger
	// live is each group's records by storeKey: a smallmap, as most
	// groups have a few (a Go map spends ~770 bytes on the first).
	live      map[string]*smallmap.Map[string, recordlog.Record]
	liveBytes int64
	// hint is the decoded records of the write in progress, one per
	// frame in order, so that Add need not decode them again (nil
	// while opening: Add decodes the key).
	hint []Record
}

// Add implements recordlog.Index. Only the key is decoded: it says what
// the record supersedes; a value this version cannot read is kept (it is
// skipped when the group is loaded, and compaction keeps it).
func (x *groupIndex) Add(r recordlog.Record) {
	var k Record
	if len(x.hint) > 0 {
		k, x.hint = x.hint[0], x.hint[1:]
	} else {
		var err error
		if k, err = decodeRecord(r.Key, nil); err != nil {
			// A key with a good CRC that we cannot read: written by a
			// newer version. It is dropped at the next compaction.
			x.logger.Warn("skipping group record with an unreadable key", "err", err)
			return
		}
	}
	keys := x.live[k.Group]
	if k.Kind == RecGroupTombstone && r.Tombstone {
		// A group tombstone ends everything the group had.
		if keys != nil {
			for _, old := range keys.All() {
				x.liveBytes -= int64(len(old.Frame))
			}
		}
		delete(x.live, k.Group)
		return
	}
	sk := k.storeKey()
	if keys != nil {
		if old, ok := keys.Get(sk); ok {
			x.liveBytes -= int64(len(old.Frame))
			keys.Delete(sk)
		}
	}
	if r.Tombstone {
		if keys != nil && keys.Len() == 0 {
			delete(x.live, k.Group)
		}
		return
	}
	if keys == nil {
		keys = &smallmap.Map[string, recordlog.Record]{}
		x.live[k.Group] = keys
	}
	keys.Set(sk, r)
	x.liveBytes += int64(len(r.Frame))
}

// Live implements recordlog.Index: groups in name order, each in
// sortedRecords order.
func (x *groupIndex) Live(yield func(recordlog.Record) bool) {
	groups := make([]string, 0, len(x.live))
	for g := range x.live {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		for _, r := range sortedRecords(x.live[g]) {
			if !yield(r) {
				return
			}
		}
	}
}

// LiveBytes implements recordlog.Index.
func (x *groupIndex) LiveBytes() int64 { return x.liveBytes }

// groups decodes every group's live records.
func (x *groupIndex) groups() map[string][]Record {
	out := make(map[string][]Record, len(x.live))
	for group := range x.live {
		if recs := x.records(group); len(recs) > 0 {
			out[group] = recs
		}
	}
	return out
}

// records decodes a group's live records, in the order that rebuilds it.
func (x *groupIndex) records(group string) []Record {
	var out []Record
	for _, lr := range sortedRecords(x.live[group]) {
		if r, err := decodeRecord(lr.Key, lr.Value); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// sortedRecords orders a group's records: group state first, then
// offsets, so that restoring in this order rebuilds the group.
func sortedRecords(keys *smallmap.Map[string, recordlog.Record]) []recordlog.Record {
	if keys == nil {
		return nil
	}
	ks := make([]string, 0, keys.Len())
	for k := range keys.Keys() {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if (ks[i][0] == 'o') != (ks[j][0] == 'o') {
			return ks[j][0] == 'o'
		}
		return ks[i] < ks[j]
	})
	out := make([]recordlog.Record, len(ks))
	for i, k := range ks {
		out[i], _ = keys.Get(k)
	}
	return out
}

// Groups returns every group's live records, in the order that rebuilds
// the group (what OpenStore returned, plus everything applied since). A
// standby coordinator loads its groups from here when it activates.
func (s *Store) Groups() map[string][]Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.idx.groups()
}

// GroupRecords returns a group's live records (to rebuild its state).
func (s *Store) GroupRecords(group string) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.idx.records(group)
}

// readFrame reads the frame at raw[pos:], returning its body (what
// follows length and crc) and where the next frame starts.
func readFrame(raw []byte, pos int64) (body []byte, next int64, ok bool) {
	if pos < 0 || pos > int64(len(raw)) {
		return nil, pos, false
	}
	_, n, err := recordlog.LayoutKV.ReadFrame(raw[pos:], maxFrame)
	if err != nil {
		return nil, pos, false
	}
	return raw[pos+frameHeader : pos+int64(n)], pos + int64(n), true
}

// splitBody splits a frame body into key and value (nil: tombstone).
func splitBody(body []byte) (key, value []byte, ok bool) {
	key, value, _, err := recordlog.LayoutKV.ParseBody(body)
	return key, value, err == nil
}

// appendFrame appends r's frame to dst.
func appendFrame(dst []byte, r *Record) []byte {
	key, value := r.encode()
	return recordlog.LayoutKV.AppendFrame(dst, key, value, value == nil)
}

// Append writes records to the log: when it returns nil they are in the
// OS (and on disk if the store fsyncs). On error nothing may be assumed
// about which were written; the store refuses further appends until it is
// reopened, so that a half-written frame is never followed by good ones.
func (s *Store) Append(recs []Record) error {
	return s.append(recs, nil)
}

// append writes recs (or, when frames is not nil, the records already
// framed in it, verbatim) in one write.
func (s *Store) append(recs []Record, frames []byte) error {
	b := s.log.NewBatch()
	if frames != nil {
		if err := b.AppendFrames(frames); err != nil {
			return fmt.Errorf("group log: %w", err)
		}
	} else {
		for i := range recs {
			key, value := recs[i].encode()
			if value == nil {
				b.Delete(key)
			} else {
				b.Put(key, value)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// recs are the records of the frames, one for one (decodePersistCmd
	// checks a command's count).
	s.mu.idx.hint = recs
	defer func() { s.mu.idx.hint = nil }()
	if err := s.log.Write(b); err != nil {
		// The disk's refusal, this node's alone (a malformed frame
		// above is every node's).
		return replication.MarkLocal(fmt.Errorf("group log: %w", err))
	}
	return nil
}

// Apply implements replication.Applier: it persists a persistCmd's records and
// returns the error, if any, as the result. It is safe from any goroutine
// (the raft FSM's, while others read the store) and deterministic: a
// decoded command's frames are written as they came, so every node's log
// holds the same bytes and indexes the same live records. (Which raft
// index the store holds is the cluster's snapshot manifest's to say: the
// whole state directory is restored to a snapshot's index at start.)
func (s *Store) Apply(cmd replication.Command) any {
	c, ok := cmd.(*persistCmd)
	if !ok {
		return fmt.Errorf("group store: unknown command %T", cmd)
	}
	if err := s.append(c.recs, c.frames); err != nil {
		return err
	}
	return nil
}

// Sync fsyncs the log (the broker's flush interval).
func (s *Store) Sync() error { return s.log.Sync() }

// Size is the log's current size in bytes (for tests and metrics).
func (s *Store) Size() int64 { return s.log.Size() }

// Close fsyncs and closes the log.
func (s *Store) Close() error { return s.log.Close() }
