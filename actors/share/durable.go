package share

// The durable form of a State, and the store keys.
//
// What is persisted, and when: the durable form is the state with every
// ACQUIRED record written as AVAILABLE with its delivery count (locks and
// holders are not kept: after a restart or a failover nobody holds a lock
// the new leader knows of, as in Kafka). The actor writes it whenever it
// differs from what was last written, before answering or adopting:
//   - at acquisition, because the delivery count rises: a broker crash
//     must not hand a poison record out again with the count it had, or it
//     could be redelivered forever; at the limit a reloaded record is
//     archived instead of delivered (State.Acquire);
//   - at acknowledgement (ACCEPT, REJECT, GAP; RELEASE at the limit),
//     because an answered ACCEPT must never be lost;
//   - at initialisation, alteration and SPSO moves, so that every node
//     starts the share-partition at the same offset.
// A lock expiry or a RELEASE below the limit changes nothing durable
// (ACQUIRED n and AVAILABLE n are written alike) and costs no write.
//
// Value (version 1): version u8 | topic id [16] | start varint | end
// varint | spans uvarint | per span: length uvarint, state u8 (available,
// acknowledged, archived), delivery count varint. An empty value is the
// tombstone that forgets the key.
//
// Key: group length u16 | group | topic length u16 | topic | partition
// i32, big-endian.

import (
	"encoding/binary"
	"errors"
	"fmt"
)

const durableVersion = 1

// partKey names a share-partition in the Manager and the store (the
// topic id is in the value: a recreated topic resets the state).
type partKey struct {
	Group     string
	Topic     string
	Partition int32
}

func (k Key) part() partKey { return partKey{Group: k.Group, Topic: k.Topic, Partition: k.Partition} }

func (k partKey) String() string { return fmt.Sprintf("%s:%s-%d", k.Group, k.Topic, k.Partition) }

// encodeKey is k's store key.
func encodeKey(k partKey) []byte {
	b := make([]byte, 0, 8+len(k.Group)+len(k.Topic))
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.Group)))
	b = append(b, k.Group...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.Topic)))
	b = append(b, k.Topic...)
	return binary.BigEndian.AppendUint32(b, uint32(k.Partition))
}

func decodeKey(b []byte) (partKey, error) {
	var k partKey
	str := func() (string, bool) {
		if len(b) < 2 {
			return "", false
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return "", false
		}
		s := string(b[2 : 2+n])
		b = b[2+n:]
		return s, true
	}
	var ok1, ok2 bool
	k.Group, ok1 = str()
	k.Topic, ok2 = str()
	if !ok1 || !ok2 || len(b) != 4 {
		return k, errors.New("malformed share-partition key")
	}
	k.Partition = int32(binary.BigEndian.Uint32(b))
	return k, nil
}

// checkKeyLens refuses names the key cannot hold.
func checkKeyLens(k partKey) error {
	if len(k.Group) > 1<<14 || len(k.Topic) > 1<<14 {
		return fmt.Errorf("share-partition %s: name too long", k)
	}
	return nil
}

// durable returns s's durable form (nil for an uninitialised state).
func (s *State) durable() []byte {
	if !s.Initialized {
		return nil
	}
	b := []byte{durableVersion}
	b = append(b, s.TopicID[:]...)
	b = binary.AppendVarint(b, s.StartOffset)
	b = binary.AppendVarint(b, s.EndOffset)
	// Spans as written: ACQUIRED reads as AVAILABLE, so neighbours that
	// then look alike are written as one.
	type dspan struct {
		n     int64
		state RecState
		count int16
	}
	var ds []dspan
	for _, sp := range s.spans {
		d := dspan{n: sp.len(), state: sp.State, count: sp.Count}
		if d.state == Acquired {
			d.state = Available
		}
		if d.state.terminal() {
			d.count = 0
		}
		if n := len(ds); n > 0 && ds[n-1].state == d.state && ds[n-1].count == d.count {
			ds[n-1].n += d.n
			continue
		}
		ds = append(ds, d)
	}
	b = binary.AppendUvarint(b, uint64(len(ds)))
	for _, d := range ds {
		b = binary.AppendUvarint(b, uint64(d.n))
		b = append(b, byte(d.state))
		b = binary.AppendVarint(b, int64(d.count))
	}
	return b
}

// decodeState rebuilds a state from its durable form.
func decodeState(b []byte) (*State, error) {
	if len(b) < 17 || b[0] != durableVersion {
		return nil, errors.New("unknown share-partition state version")
	}
	s := &State{Initialized: true}
	copy(s.TopicID[:], b[1:17])
	b = b[17:]
	bad := errors.New("malformed share-partition state")
	varint := func() (int64, bool) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	uvarint := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	var ok bool
	if s.StartOffset, ok = varint(); !ok {
		return nil, bad
	}
	if s.EndOffset, ok = varint(); !ok {
		return nil, bad
	}
	nspans, ok := uvarint()
	if !ok || nspans > uint64(len(b)) || s.EndOffset < s.StartOffset {
		return nil, bad
	}
	next := s.StartOffset
	for range nspans {
		n, ok1 := uvarint()
		if !ok1 || n == 0 || n > uint64(s.EndOffset-next) || len(b) < 1 {
			return nil, bad
		}
		st := RecState(b[0])
		b = b[1:]
		count, ok2 := varint()
		if !ok2 || (st != Available && st != Acknowledged && st != Archived) || count < 0 || count > 1<<15-1 {
			return nil, bad
		}
		s.spans = append(s.spans, span{First: next, Last: next + int64(n) - 1, State: st, Count: int16(count)})
		next += int64(n)
	}
	if next != s.EndOffset || len(b) != 0 {
		return nil, bad
	}
	s.coalesce()
	s.advance()
	if err := s.checkInvariants(); err != nil {
		return nil, fmt.Errorf("share-partition state: %w", err)
	}
	return s, nil
}
