package txn

// The replicated command. A putCmd travels in the raft log as the store
// frame it writes (store.go: length, crc32c, id, record value), so an entry
// holds exactly the bytes every node's log will hold, checksummed.

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/regent-broker/regent/actors/replication"
)

const putKind = "txn.put"

func init() { replication.RegisterDecoder(putKind, decodePutCmd) }

// putCmd is the replicated command: one transactional id's new state,
// encoded once, when it is made.
type putCmd struct {
	id    string
	frame []byte
	// dead: the state is Dead, the frame a tombstone that forgets id.
	dead bool
}

// newPutCmd encodes t; it fails for a state that cannot be persisted, so
// that nothing unwritable is proposed.
func newPutCmd(t *Txn) (*putCmd, error) {
	if t.ID == epochKey {
		return nil, errors.New("empty transactional id")
	}
	if len(t.ID) > 1<<15 {
		return nil, fmt.Errorf("transactional id of %d bytes", len(t.ID))
	}
	value, err := encodeTxn(t)
	if err != nil {
		return nil, fmt.Errorf("encode transaction %q: %w", t.ID, err)
	}
	return &putCmd{id: t.ID, frame: appendStoreFrame(nil, t.ID, value), dead: value == nil}, nil
}

func (c *putCmd) String() string { return fmt.Sprintf("put transaction %q", c.id) }

// CommandKind implements replication.Encodable.
func (c *putCmd) CommandKind() string { return putKind }

// AppendCommand implements replication.Encodable.
func (c *putCmd) AppendCommand(b []byte) []byte { return append(b, c.frame...) }

// decodePutCmd is the replication.Decoder of putCmd. The frame it keeps is a
// copy: the payload aliases the raft entry.
func decodePutCmd(payload []byte) (replication.Command, error) {
	frame := bytes.Clone(payload)
	id, value, next, ok := readStoreFrame(frame, 0)
	if !ok {
		return nil, errors.New("torn or corrupt frame")
	}
	if id == epochKey {
		return nil, errors.New("empty transactional id")
	}
	if next != int64(len(frame)) {
		return nil, fmt.Errorf("%d bytes after the frame", int64(len(frame))-next)
	}
	if len(value) > 0 {
		// Refuse what the store could not load back.
		if _, err := decodeTxn(id, value); err != nil {
			return nil, fmt.Errorf("transaction %q: %w", id, err)
		}
	}
	return &putCmd{id: id, frame: frame, dead: len(value) == 0}, nil
}
