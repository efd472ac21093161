package txn

// The coordinator epoch. Kafka's is the leader epoch of the
// __transaction_state partition that owns the transactional id: it rises
// every time coordination moves or is reloaded, every WriteTxnMarkers
// carries it, and a partition refuses a marker whose coordinator epoch is
// below the last one it took from that producer (a stale coordinator).
// Regent has one coordinator for every id, so it keeps one epoch, in the
// record log beside the transactions (under the empty key: Kafka, like
// Regent's protocol layer, refuses an empty transactional id). Every
// activation proposes an epochCmd before it starts its actors; applying it
// raises the stored epoch by one, the same way on every node, so the
// epoch never goes backwards across restarts, failovers and snapshots.
//
//	record value: version u8 (0) | epoch i32

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/regent-broker/regent/actors/replication"
)

const (
	epochKind = "txn.epoch"
	// epochKey is the epoch record's key in the log.
	epochKey = ""
	// noEpoch is the stored epoch of a log that never had one: the first
	// activation takes epoch 0, as a first partition leader does.
	noEpoch = -1
)

func init() { replication.RegisterDecoder(epochKind, decodeEpochCmd) }

// epochCmd raises the coordinator epoch by one. It carries nothing: the
// new epoch is decided at apply, from the store's, so that a proposal
// that raced another (a deposed leader's) still yields a higher epoch.
type epochCmd struct{}

func (epochCmd) String() string { return "raise the transaction coordinator epoch" }

// CommandKind implements replication.Encodable.
func (epochCmd) CommandKind() string { return epochKind }

// AppendCommand implements replication.Encodable.
func (epochCmd) AppendCommand(b []byte) []byte { return b }

func decodeEpochCmd(payload []byte) (replication.Command, error) {
	if len(payload) != 0 {
		return nil, fmt.Errorf("epoch command of %d bytes", len(payload))
	}
	return epochCmd{}, nil
}

func encodeEpoch(epoch int32) []byte {
	return binary.BigEndian.AppendUint32([]byte{0}, uint32(epoch))
}

func decodeEpoch(v []byte) (int32, error) {
	if len(v) != 5 || v[0] != 0 {
		return 0, errors.New("coordinator epoch record: bad version or length")
	}
	e := int32(binary.BigEndian.Uint32(v[1:]))
	if e < 0 {
		return 0, fmt.Errorf("coordinator epoch record: epoch %d", e)
	}
	return e, nil
}
