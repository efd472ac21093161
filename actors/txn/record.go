package txn

// The persisted form of a Txn: one record per state change, keyed by the
// transactional id; the last record of an id is its state, an empty value
// (Dead) forgets it.
//
//	version u8 (0) | producerID i64 | epoch i16 | lastProducerID i64 |
//	lastEpoch i16 | nextProducerID i64 | timeoutMs i32 | state i8 |
//	startMs i64 | lastUpdateMs i64 | flags u8 (1: TV2) |
//	partitions u32 { topic (u16 len) | partition i32 } |
//	groups u32 { group (u16 len) }

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

const recordVersion = 0

// encodeTxn returns t's record value (nil for Dead).
func encodeTxn(t *Txn) ([]byte, error) {
	if t.State == StateDead {
		return nil, nil
	}
	if t.State == StatePrepareEpochFence {
		return nil, errors.New("PrepareEpochFence is never persisted")
	}
	b := make([]byte, 0, 64+16*len(t.Partitions))
	b = append(b, recordVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(t.ProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(t.ProducerEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(t.LastProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(t.LastProducerEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(t.NextProducerID))
	b = binary.BigEndian.AppendUint32(b, uint32(t.TimeoutMs))
	b = append(b, byte(t.State))
	b = binary.BigEndian.AppendUint64(b, uint64(t.StartMs))
	b = binary.BigEndian.AppendUint64(b, uint64(t.LastUpdateMs))
	var flags byte
	if t.TV2 {
		flags |= 1
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint32(b, uint32(len(t.Partitions)))
	for _, p := range t.Partitions {
		if len(p.Topic) > math.MaxUint16 {
			return nil, fmt.Errorf("topic name of %d bytes", len(p.Topic))
		}
		b = appendString(b, p.Topic)
		b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(t.Groups)))
	for _, g := range t.Groups {
		if len(g) > math.MaxUint16 {
			return nil, fmt.Errorf("group name of %d bytes", len(g))
		}
		b = appendString(b, g)
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// decodeTxn parses a record value of id.
func decodeTxn(id string, v []byte) (*Txn, error) {
	d := decoder{b: v}
	if ver := d.u8(); ver != recordVersion {
		return nil, fmt.Errorf("transaction record version %d", ver)
	}
	t := &Txn{ID: id}
	t.ProducerID = int64(d.u64())
	t.ProducerEpoch = int16(d.u16())
	t.LastProducerID = int64(d.u64())
	t.LastProducerEpoch = int16(d.u16())
	t.NextProducerID = int64(d.u64())
	t.TimeoutMs = int32(d.u32())
	t.State = State(d.u8())
	t.StartMs = int64(d.u64())
	t.LastUpdateMs = int64(d.u64())
	t.TV2 = d.u8()&1 != 0
	n := d.u32()
	if n > uint32(len(v)) {
		return nil, errors.New("transaction record: bad partition count")
	}
	for range n {
		topic := d.str()
		t.Partitions = append(t.Partitions, TopicPartition{Topic: topic, Partition: int32(d.u32())})
	}
	n = d.u32()
	if n > uint32(len(v)) {
		return nil, errors.New("transaction record: bad group count")
	}
	for range n {
		t.Groups = append(t.Groups, d.str())
	}
	if d.bad || len(d.b) != 0 {
		return nil, errors.New("transaction record: truncated or trailing bytes")
	}
	if t.State < StateEmpty || t.State > StateDead || t.State == StateDead {
		return nil, fmt.Errorf("transaction record: state %d", t.State)
	}
	return t, nil
}

// decoder reads big-endian fields; a short read sets bad and yields zeros.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) take(n int) []byte {
	if d.bad || len(d.b) < n {
		d.bad = true
		return make([]byte, n)
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) u8() uint8   { return d.take(1)[0] }
func (d *decoder) u16() uint16 { return binary.BigEndian.Uint16(d.take(2)) }
func (d *decoder) u32() uint32 { return binary.BigEndian.Uint32(d.take(4)) }
func (d *decoder) u64() uint64 { return binary.BigEndian.Uint64(d.take(8)) }
func (d *decoder) str() string { return string(d.take(int(d.u16()))) }
