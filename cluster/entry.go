package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/regent-broker/regent/actors/replication"
)

// entryVersion is the first byte of every raft entry Regent writes; a node
// that reads another version refuses it loudly instead of guessing.
// Version 2 entries, written by partition raft groups, carry after the
// version the metadata group's state index the proposer's state held
// (fsm.awaitMetadata): a follower applies them only once its own metadata
// state holds as much, so every partition the proposer knew exists here.
const (
	entryVersion      = 1
	entryVersionAfter = 2
)

// entryCommand is one command inside a raft entry. The replicator coalesces
// many proposals into one entry: raft's cost is per entry, not per byte.
type entryCommand struct {
	key     string
	kind    string
	trace   string // W3C traceparent of the proposing request ("": untraced)
	payload []byte
	// cmd, when set, is encoded straight into the entry instead of
	// payload: a produce's records are copied once, not twice.
	cmd Encodable
	// size estimates the encoded command (for the entry size limit).
	size int
}

// wireSize estimates c's bytes in an entry.
func (c entryCommand) wireSize() int {
	return len(c.payload) + c.size + len(c.key) + len(c.kind) + len(c.trace) + 16
}

// CommandSizer is replication.CommandSizer.
type CommandSizer = replication.CommandSizer

// appendEntryCommand appends c's framing to b. The payload length is a
// fixed 4 bytes so the command can be encoded in place and patched.
func appendEntryCommand(b []byte, c entryCommand) []byte {
	b = binary.AppendUvarint(b, uint64(len(c.key)))
	b = append(b, c.key...)
	b = binary.AppendUvarint(b, uint64(len(c.kind)))
	b = append(b, c.kind...)
	b = binary.AppendUvarint(b, uint64(len(c.trace)))
	b = append(b, c.trace...)
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	if c.cmd != nil {
		b = c.cmd.AppendCommand(b)
	} else {
		b = append(b, c.payload...)
	}
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// encodeEntry frames commands as one raft entry.
func encodeEntry(cmds []entryCommand) []byte { return encodeEntryAfter(cmds, false, 0) }

// encodeEntryAfter frames commands as one raft entry; withAfter writes a
// version 2 entry carrying the metadata state index after.
func encodeEntryAfter(cmds []entryCommand, withAfter bool, after uint64) []byte {
	size := 1 + 2*binary.MaxVarintLen64
	for _, c := range cmds {
		size += 3*binary.MaxVarintLen64 + 4 + len(c.key) + len(c.kind) + len(c.trace) + len(c.payload) + c.size
	}
	b := make([]byte, 0, size)
	if withAfter {
		b = append(b, entryVersionAfter)
		b = binary.AppendUvarint(b, after)
	} else {
		b = append(b, entryVersion)
	}
	b = binary.AppendUvarint(b, uint64(len(cmds)))
	for _, c := range cmds {
		b = appendEntryCommand(b, c)
	}
	return b
}

var errShortEntry = errors.New("raft entry truncated")

// decodeEntry splits a raft entry into its commands; payloads alias data.
func decodeEntry(data []byte) ([]entryCommand, error) {
	cmds, _, err := decodeEntryAfter(data)
	return cmds, err
}

// decodeEntryAfter is decodeEntry, also returning the metadata state index
// a version 2 entry carries (0 for version 1).
func decodeEntryAfter(data []byte) ([]entryCommand, uint64, error) {
	if len(data) == 0 {
		return nil, 0, errShortEntry
	}
	var after uint64
	switch v := data[0]; {
	case v > entryVersionAfter:
		return nil, 0, fmt.Errorf("raft entry version %d, this node reads up to %d: %w", v, entryVersionAfter, replication.ErrUnreadable)
	case v == entryVersionAfter:
		a, w := binary.Uvarint(data[1:])
		if w <= 0 {
			return nil, 0, errShortEntry
		}
		after = a
		data = data[1+w:]
	case v == entryVersion:
		data = data[1:]
	default:
		return nil, 0, fmt.Errorf("raft entry version %d, this node reads %d and %d", v, entryVersion, entryVersionAfter)
	}
	cmds, err := decodeEntryCommands(data)
	return cmds, after, err
}

// entryAfter is the metadata state index a version 2 entry carries, read
// from its header alone (0 for any other entry, or a malformed one, which
// decoding refuses later).
func entryAfter(data []byte) uint64 {
	if len(data) < 2 || data[0] != entryVersionAfter {
		return 0
	}
	a, w := binary.Uvarint(data[1:])
	if w <= 0 {
		return 0
	}
	return a
}

// decodeEntryCommands decodes an entry's commands, after its header.
func decodeEntryCommands(data []byte) ([]entryCommand, error) {
	n, w := binary.Uvarint(data)
	if w <= 0 || n > uint64(len(data)) {
		return nil, errShortEntry
	}
	data = data[w:]
	cmds := make([]entryCommand, 0, n)
	field := func() ([]byte, error) {
		l, w := binary.Uvarint(data)
		if w <= 0 || l > uint64(len(data)-w) {
			return nil, errShortEntry
		}
		f := data[w : w+int(l)]
		data = data[w+int(l):]
		return f, nil
	}
	for i := uint64(0); i < n; i++ {
		key, err := field()
		if err != nil {
			return nil, err
		}
		kind, err := field()
		if err != nil {
			return nil, err
		}
		trace, err := field()
		if err != nil {
			return nil, err
		}
		if len(data) < 4 {
			return nil, errShortEntry
		}
		pl := binary.BigEndian.Uint32(data)
		if uint64(pl) > uint64(len(data)-4) {
			return nil, errShortEntry
		}
		payload := data[4 : 4+pl]
		data = data[4+pl:]
		cmds = append(cmds, entryCommand{key: string(key), kind: string(kind), trace: string(trace), payload: payload})
	}
	if len(data) != 0 {
		return nil, fmt.Errorf("raft entry has %d trailing bytes", len(data))
	}
	return cmds, nil
}
