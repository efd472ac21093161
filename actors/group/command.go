package group

// The replicated command. A persistCmd travels in the raft log as
//
//	version u8 (0) | record count u32 | the records as store frames
//
// (store.go), so an entry carries exactly the bytes every node's log will
// hold, checksummed, and the count catches an entry cut at a frame end.

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/regent-broker/regent/actors/replication"
)

const (
	persistKind       = "group.persist"
	persistCmdVersion = 0
)

func init() { replication.RegisterDecoder(persistKind, decodePersistCmd) }

// persistCmd is the replicated command: records to make durable. A
// decoded command also carries their frames (frames, with bounds[i] the
// start of record i and a final end), which the store appends verbatim so
// that every node writes the leader's bytes.
type persistCmd struct {
	recs   []Record
	frames []byte
	bounds []int
}

func (c *persistCmd) String() string { return fmt.Sprintf("persist %d group records", len(c.recs)) }

// CommandKind implements replication.Encodable.
func (c *persistCmd) CommandKind() string { return persistKind }

// AppendCommand implements replication.Encodable.
func (c *persistCmd) AppendCommand(b []byte) []byte {
	b = append(b, persistCmdVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.recs)))
	if c.frames != nil {
		return append(b, c.frames...)
	}
	for i := range c.recs {
		b = appendFrame(b, &c.recs[i])
	}
	return b
}

// decodePersistCmd is the replication.Decoder of persistCmd. It copies the
// payload first: the records and frames it returns keep slices of it.
func decodePersistCmd(payload []byte) (replication.Command, error) {
	if len(payload) < 5 {
		return nil, fmt.Errorf("payload of %d bytes", len(payload))
	}
	if v := payload[0]; v > persistCmdVersion {
		return nil, fmt.Errorf("version %d, this node reads up to %d: %w", v, persistCmdVersion, replication.ErrUnreadable)
	} else if v != persistCmdVersion {
		return nil, fmt.Errorf("unknown version %d", v)
	}
	n := binary.BigEndian.Uint32(payload[1:])
	raw := bytes.Clone(payload[5:])
	// Every frame is at least a header and an empty key and value.
	if int64(n) > int64(len(raw))/(frameHeader+8) {
		return nil, fmt.Errorf("%d records in %d bytes", n, len(raw))
	}
	c := &persistCmd{frames: raw, recs: make([]Record, 0, n), bounds: make([]int, 1, n+1)}
	var pos int64
	for pos < int64(len(raw)) {
		body, next, ok := readFrame(raw, pos)
		if !ok {
			return nil, fmt.Errorf("record %d: torn or corrupt frame at byte %d", len(c.recs), pos)
		}
		key, value, ok := splitBody(body)
		if !ok {
			return nil, fmt.Errorf("record %d: malformed frame body", len(c.recs))
		}
		r, err := decodeRecord(key, value)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", len(c.recs), err)
		}
		c.recs = append(c.recs, r)
		c.bounds = append(c.bounds, int(next))
		pos = next
	}
	if len(c.recs) != int(n) {
		return nil, fmt.Errorf("%d records of %d", len(c.recs), n)
	}
	return c, nil
}
