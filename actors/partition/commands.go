package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage"
)

// The partition's replicated commands. In raft mode they travel in the
// raft log and every node applies them, so a command carries everything
// Apply needs (the proposer's clock reading included): the same command
// applied to the same state gives the same result on every node.

// Command kinds name the decoders; they are part of the raft log's format,
// so they are never renamed.
const (
	kindAppend        = "partition.append"
	kindMarker        = "partition.marker"
	kindDeleteRecords = "partition.delete_records"
	kindRetain        = "partition.retain"
	kindCompact       = "partition.compact"
)

// commandVersion opens every encoding, so that a later format can be told
// apart from this one.
const commandVersion = 1

// appendCheckedVersion opens an appendCmd whose records the proposer
// checked: the same layout as version 1, which says they were not.
const appendCheckedVersion = 2

// checkedAppends says whether a produce may be replicated as checked
// (appendCheckedVersion), which a node of an earlier version cannot read:
// a cluster node sets it to follow the finalized regent.raft.version
// (SetCheckedAppends). Unset, it may. A single node (replication.Local)
// never checks first: its apply, right after, checks once.
var checkedAppends atomic.Pointer[func() bool]

// SetCheckedAppends sets what decides, at each produce, whether its
// records are checked before replication and replicated as checked (true)
// or checked by every node at apply (false). Any goroutine.
func SetCheckedAppends(allowed func() bool) { checkedAppends.Store(&allowed) }

func appendsChecked() bool {
	f := checkedAppends.Load()
	return f == nil || *f == nil || (*f)()
}

func init() {
	replication.RegisterDecoder(kindAppend, decodeAppend)
	replication.RegisterDecoder(kindMarker, decodeMarker)
	replication.RegisterDecoder(kindDeleteRecords, decodeDeleteRecords)
	replication.RegisterDecoder(kindRetain, decodeRetain)
	replication.RegisterDecoder(kindCompact, decodeCompact)
}

// appendCmd is the replicated form of a produce: offsets and sequence
// checks are decided when it is applied.
type appendCmd struct {
	records []byte
	now     int64 // the proposer's clock, unix nanoseconds
	// checked: the proposer found the records pass State.CheckProduce,
	// so the nodes applying it skip those checks (ProduceChecked). Encoded
	// as the command's version (appendCheckedVersion), so a command of
	// an older node's log, which was not checked, is checked at apply.
	checked bool
	// term is the raft term of the entry that committed it (SetTerm; 0
	// on a single node): the leader epoch its batches are stamped with.
	// Not encoded: every node reads it from the entry.
	term uint64
}

// SetTerm implements replication.Termed.
func (c *appendCmd) SetTerm(term uint64) { c.term = term }

// markerCmd is the replicated form of a transaction marker.
type markerCmd struct {
	pid              int64
	epoch            int16
	commit           bool
	coordinatorEpoch int32
	now              int64  // the proposer's clock, unix nanoseconds
	term             uint64 // as appendCmd's
}

// SetTerm implements replication.Termed.
func (c *markerCmd) SetTerm(term uint64) { c.term = term }

// deleteRecordsCmd moves the log start offset to offset (already resolved
// and checked against the high watermark by the proposer).
//
// It is also the replicated form of retention (retain set, kind
// partition.retain): the leader evaluates retention.ms and retention.bytes
// on its own log and clock (storage.Log.RetentionOffset) and proposes the
// start offset they call for; every node then applies it exactly as a
// DeleteRecords, so all end with that start offset whatever their segment
// boundaries, and followers never run retention on their own clocks. One
// type for both keeps a single apply path for moving the log start.
type deleteRecordsCmd struct {
	offset int64
	retain bool  // decided by the leader's retention pass, not a client
	now    int64 // retain only: the proposer's clock, unix nanoseconds (for the record; apply does not read it)
}

// compactCmd is the replicated form of a compaction pass: the leader
// decides, on its log and clock, that the partition is due
// (min.cleanable.dirty.ratio, min/max.compaction.lag.ms, a tombstone's
// delete horizon: storage.Log.PlanCompaction) and proposes the pass in
// offsets, with its clock and delete.retention.ms; every node cleans
// exactly the batches below end with a key map of [dirtyStart, end) and
// that clock (storage.Log.CompactRange), so the same records survive at
// the same offsets on every node whatever its segment boundaries.
// Followers never decide compaction themselves.
type compactCmd struct {
	dirtyStart        int64
	end               int64
	now               int64 // the proposer's clock, unix nanoseconds
	deleteRetentionMs int64 // the proposer's delete.retention.ms
}

// Encoded sizes after the version byte.
const (
	appendHeaderLen = 8                 // now, then the records to the end
	markerLen       = 8 + 2 + 1 + 4 + 8 // pid, epoch, commit, coordinator epoch, now
	deleteLen       = 8                 // offset
	retainLen       = 8 + 8             // offset, now
	compactLen      = 8 + 8 + 8 + 8     // dirty start, end, now, delete retention
)

// CommandKind implements replication.Encodable.
func (c *appendCmd) CommandKind() string { return kindAppend }

// CommandSize implements replication.CommandSizer: the raft replicator batches
// produces by size without encoding them first.
func (c *appendCmd) CommandSize() int { return 1 + appendHeaderLen + len(c.records) }

// AppendCommand implements replication.Encodable.
func (c *appendCmd) AppendCommand(b []byte) []byte {
	b = slices.Grow(b, 1+appendHeaderLen+len(c.records))
	version := byte(commandVersion)
	if c.checked {
		version = appendCheckedVersion
	}
	b = append(b, version)
	b = binary.BigEndian.AppendUint64(b, uint64(c.now))
	return append(b, c.records...)
}

func decodeAppend(p []byte) (replication.Command, error) {
	version := byte(commandVersion)
	if len(p) > 0 && p[0] == appendCheckedVersion {
		version = appendCheckedVersion
	}
	body, err := commandBodyOf(p, version, appendHeaderLen, true)
	if err != nil {
		return nil, err
	}
	// Not copied: p is the raft entry's, which replication may still be
	// reading, and Produce writes to no batch (Append.Heads).
	c := &appendCmd{now: int64(binary.BigEndian.Uint64(body)), records: body[appendHeaderLen:], checked: version == appendCheckedVersion}
	return c, nil
}

// CommandKind implements replication.Encodable.
func (c *markerCmd) CommandKind() string { return kindMarker }

// AppendCommand implements replication.Encodable.
func (c *markerCmd) AppendCommand(b []byte) []byte {
	b = slices.Grow(b, 1+markerLen)
	b = append(b, commandVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(c.pid))
	b = binary.BigEndian.AppendUint16(b, uint16(c.epoch))
	commit := byte(0)
	if c.commit {
		commit = 1
	}
	b = append(b, commit)
	b = binary.BigEndian.AppendUint32(b, uint32(c.coordinatorEpoch))
	return binary.BigEndian.AppendUint64(b, uint64(c.now))
}

func decodeMarker(p []byte) (replication.Command, error) {
	body, err := commandBody(p, markerLen, false)
	if err != nil {
		return nil, err
	}
	if body[10] > 1 {
		return nil, fmt.Errorf("marker commit flag %d", body[10])
	}
	return &markerCmd{
		pid:              int64(binary.BigEndian.Uint64(body)),
		epoch:            int16(binary.BigEndian.Uint16(body[8:])),
		commit:           body[10] == 1,
		coordinatorEpoch: int32(binary.BigEndian.Uint32(body[11:])),
		now:              int64(binary.BigEndian.Uint64(body[15:])),
	}, nil
}

// CommandKind implements replication.Encodable.
func (c *deleteRecordsCmd) CommandKind() string {
	if c.retain {
		return kindRetain
	}
	return kindDeleteRecords
}

// AppendCommand implements replication.Encodable.
func (c *deleteRecordsCmd) AppendCommand(b []byte) []byte {
	b = slices.Grow(b, 1+retainLen)
	b = append(b, commandVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(c.offset))
	if c.retain {
		b = binary.BigEndian.AppendUint64(b, uint64(c.now))
	}
	return b
}

func decodeRetain(p []byte) (replication.Command, error) {
	body, err := commandBody(p, retainLen, false)
	if err != nil {
		return nil, err
	}
	return &deleteRecordsCmd{
		offset: int64(binary.BigEndian.Uint64(body)),
		retain: true,
		now:    int64(binary.BigEndian.Uint64(body[8:])),
	}, nil
}

func decodeDeleteRecords(p []byte) (replication.Command, error) {
	body, err := commandBody(p, deleteLen, false)
	if err != nil {
		return nil, err
	}
	return &deleteRecordsCmd{offset: int64(binary.BigEndian.Uint64(body))}, nil
}

// CommandKind implements replication.Encodable.
func (c *compactCmd) CommandKind() string { return kindCompact }

// AppendCommand implements replication.Encodable.
func (c *compactCmd) AppendCommand(b []byte) []byte {
	b = slices.Grow(b, 1+compactLen)
	b = append(b, commandVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(c.dirtyStart))
	b = binary.BigEndian.AppendUint64(b, uint64(c.end))
	b = binary.BigEndian.AppendUint64(b, uint64(c.now))
	return binary.BigEndian.AppendUint64(b, uint64(c.deleteRetentionMs))
}

func decodeCompact(p []byte) (replication.Command, error) {
	body, err := commandBody(p, compactLen, false)
	if err != nil {
		return nil, err
	}
	c := &compactCmd{
		dirtyStart:        int64(binary.BigEndian.Uint64(body)),
		end:               int64(binary.BigEndian.Uint64(body[8:])),
		now:               int64(binary.BigEndian.Uint64(body[16:])),
		deleteRetentionMs: int64(binary.BigEndian.Uint64(body[24:])),
	}
	if c.dirtyStart < 0 || c.end < c.dirtyStart {
		return nil, fmt.Errorf("compaction range [%d, %d)", c.dirtyStart, c.end)
	}
	return c, nil
}

// plan is the command as the log applies it.
func (c *compactCmd) plan() storage.CompactionPlan {
	return storage.CompactionPlan{DirtyStart: c.dirtyStart, End: c.end,
		NowMs: time.Unix(0, c.now).UnixMilli(), DeleteRetentionMs: c.deleteRetentionMs}
}

var errShortCommand = errors.New("command truncated")

// commandBody checks the version byte and the length (exactly n bytes
// after it, or at least n with more) and returns what follows the version.
func commandBody(p []byte, n int, more bool) ([]byte, error) {
	return commandBodyOf(p, commandVersion, n, more)
}

// commandBodyOf is commandBody for an encoding of the given version.
func commandBodyOf(p []byte, version byte, n int, more bool) ([]byte, error) {
	if len(p) == 0 {
		return nil, errShortCommand
	}
	if p[0] > version {
		return nil, fmt.Errorf("command version %d, this node reads up to %d: %w", p[0], version, replication.ErrUnreadable)
	}
	if p[0] != version {
		return nil, fmt.Errorf("command version %d, this node reads %d", p[0], version)
	}
	body := p[1:]
	switch {
	case len(body) < n:
		return nil, fmt.Errorf("%w: %d bytes, want %d", errShortCommand, len(body), n)
	case !more && len(body) > n:
		return nil, fmt.Errorf("command has %d trailing bytes", len(body)-n)
	}
	return body, nil
}
