package group

// The persisted records. Offsets and classic group metadata use Kafka's own
// __consumer_offsets key and value encodings (kmsg's OffsetCommitKey/Value,
// GroupMetadataKey/Value), so a record reads the same as in Kafka; KIP-848
// group state uses a key version Kafka does not (cgKeyVersion) and this
// package's own value encoding.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// RecordKind says what a record holds.
type RecordKind uint8

const (
	RecOffset RecordKind = iota + 1
	RecOffsetTombstone
	RecGroup
	RecGroupTombstone
	RecConsumerGroup
	RecTxnOffset
	RecTxnOffsetTombstone
	RecShareGroup
	RecStreamsGroup
	RecConsumerGroupMember
	RecStreamsTopology
	RecStreamsMember
)

// Record is one persisted change of a group.
type Record struct {
	Kind       RecordKind
	Group      string
	Topic      string // RecOffset*, RecTxnOffset*
	Partition  int32
	ProducerID int64                    // RecTxnOffset*
	Offset     Offset                   // RecOffset, RecTxnOffset
	Meta       *kmsg.GroupMetadataValue // RecGroup
	CG         *cgSnapshot              // RecConsumerGroup
	Member     string                   // RecConsumerGroupMember
	CGM        *cgSnapshot              // RecConsumerGroupMember (nil: tombstone)
	SG         *sgSnapshot              // RecShareGroup (nil: tombstone)
	ST         *stSnapshot              // RecStreamsGroup, RecStreamsTopology, RecStreamsMember (nil: tombstone); Member names the member
}

// Key versions, as in __consumer_offsets: 1 offset commit, 2 group
// metadata. The 0x7e.. versions are ours: KIP-848 group state (key: the
// group id) and a transaction's staged offsets (key: group, topic,
// partition, producer id; value: an offset commit value), KIP-932
// share group state and KIP-1071 streams group state (key: the group id).
const (
	offsetKeyVersion = 1
	groupKeyVersion  = 2
	cgKeyVersion     = 0x7e01
	txnKeyVersion    = 0x7e02
	sgKeyVersion     = 0x7e03
	stKeyVersion     = 0x7e04
	cgmKeyVersion    = 0x7e05
	sttKeyVersion    = 0x7e06
	stmKeyVersion    = 0x7e07
)

// storeKey identifies what a record replaces: records with the same key
// supersede each other, so compaction keeps the last of each.
func (r *Record) storeKey() string {
	switch r.Kind {
	case RecOffset, RecOffsetTombstone:
		return fmt.Sprintf("o\x00%s\x00%s\x00%d", r.Group, r.Topic, r.Partition)
	case RecConsumerGroup:
		return "c\x00" + r.Group
	case RecShareGroup:
		return "s\x00" + r.Group
	case RecStreamsGroup:
		return "t\x00" + r.Group
	case RecConsumerGroupMember:
		return "m\x00" + r.Group + "\x00" + r.Member
	case RecStreamsTopology:
		return "T\x00" + r.Group
	case RecStreamsMember:
		return "M\x00" + r.Group + "\x00" + r.Member
	case RecTxnOffset, RecTxnOffsetTombstone:
		return fmt.Sprintf("x\x00%s\x00%d\x00%s\x00%d", r.Group, r.ProducerID, r.Topic, r.Partition)
	default:
		return "g\x00" + r.Group
	}
}

// tombstone: the record deletes its key.
func (r *Record) tombstone() bool {
	return r.Kind == RecOffsetTombstone || r.Kind == RecGroupTombstone || r.Kind == RecTxnOffsetTombstone || (r.Kind == RecConsumerGroup && r.CG == nil) ||
		(r.Kind == RecShareGroup && r.SG == nil) || ((r.Kind == RecStreamsGroup || r.Kind == RecStreamsTopology || r.Kind == RecStreamsMember) && r.ST == nil) ||
		(r.Kind == RecConsumerGroupMember && r.CGM == nil)
}

// encode returns the record's key and value (nil value: a tombstone).
func (r *Record) encode() (key, value []byte) {
	switch r.Kind {
	case RecOffset, RecOffsetTombstone:
		k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: r.Group, Topic: r.Topic, Partition: r.Partition}
		key = k.AppendTo(nil)
		if r.Kind == RecOffset {
			v := kmsg.NewOffsetCommitValue()
			v.Version = 3
			v.Offset = r.Offset.Offset
			v.LeaderEpoch = r.Offset.LeaderEpoch
			v.Metadata = r.Offset.Metadata
			v.CommitTimestamp = r.Offset.CommitTime.UnixMilli()
			if !r.Offset.ExpireTime.IsZero() {
				// v1 is the only value version that carries an expiry.
				v.Version = 1
				v.ExpireTimestamp = r.Offset.ExpireTime.UnixMilli()
			}
			value = v.AppendTo(nil)
		}
	case RecGroup, RecGroupTombstone:
		k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: r.Group}
		key = k.AppendTo(nil)
		if r.Kind == RecGroup {
			value = r.Meta.AppendTo(nil)
		}
	case RecConsumerGroup:
		k := kmsg.GroupMetadataKey{Version: cgKeyVersion, Group: r.Group}
		key = k.AppendTo(nil)
		if r.CG != nil {
			value = r.CG.appendTo(nil)
		}
	case RecShareGroup:
		k := kmsg.GroupMetadataKey{Version: sgKeyVersion, Group: r.Group}
		key = k.AppendTo(nil)
		if r.SG != nil {
			value = r.SG.appendTo(nil)
		}
	case RecConsumerGroupMember:
		// A group metadata key with the member id after it.
		k := kmsg.GroupMetadataKey{Version: cgmKeyVersion, Group: r.Group}
		key = appendKeyString(k.AppendTo(nil), r.Member)
		if r.CGM != nil {
			value = r.CGM.appendTo(nil)
		}
	case RecStreamsGroup, RecStreamsTopology, RecStreamsMember:
		version := map[RecordKind]int16{RecStreamsGroup: stKeyVersion, RecStreamsTopology: sttKeyVersion, RecStreamsMember: stmKeyVersion}[r.Kind]
		k := kmsg.GroupMetadataKey{Version: version, Group: r.Group}
		key = k.AppendTo(nil)
		if r.Kind == RecStreamsMember {
			key = appendKeyString(key, r.Member)
		}
		if r.ST != nil {
			value = append([]byte(nil), r.ST.raw...)
		}
	case RecTxnOffset, RecTxnOffsetTombstone:
		// An offset commit key with the producer id after it.
		k := kmsg.OffsetCommitKey{Version: txnKeyVersion, Group: r.Group, Topic: r.Topic, Partition: r.Partition}
		key = binary.BigEndian.AppendUint64(k.AppendTo(nil), uint64(r.ProducerID))
		if r.Kind == RecTxnOffset {
			v := kmsg.NewOffsetCommitValue()
			v.Version = 3
			v.Offset, v.LeaderEpoch, v.Metadata = r.Offset.Offset, r.Offset.LeaderEpoch, r.Offset.Metadata
			v.CommitTimestamp = r.Offset.CommitTime.UnixMilli()
			value = v.AppendTo(nil)
		}
	}
	return key, value
}

// decodeRecord parses a stored key and value (nil: tombstone).
func decodeRecord(key, value []byte) (Record, error) {
	if len(key) < 2 {
		return Record{}, errors.New("short key")
	}
	version := int16(key[0])<<8 | int16(key[1])
	switch version {
	case 0, offsetKeyVersion:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return Record{}, fmt.Errorf("offset key: %w", err)
		}
		r := Record{Kind: RecOffsetTombstone, Group: k.Group, Topic: k.Topic, Partition: k.Partition}
		if value == nil {
			return r, nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil {
			return Record{}, fmt.Errorf("offset value: %w", err)
		}
		r.Kind = RecOffset
		r.Offset = Offset{Offset: v.Offset, LeaderEpoch: v.LeaderEpoch, Metadata: v.Metadata, CommitTime: time.UnixMilli(v.CommitTimestamp)}
		if v.Version < 3 {
			r.Offset.LeaderEpoch = -1
		}
		if v.Version == 1 && v.ExpireTimestamp > 0 {
			r.Offset.ExpireTime = time.UnixMilli(v.ExpireTimestamp)
		}
		return r, nil
	case groupKeyVersion:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return Record{}, fmt.Errorf("group key: %w", err)
		}
		r := Record{Kind: RecGroupTombstone, Group: k.Group}
		if value == nil {
			return r, nil
		}
		v := &kmsg.GroupMetadataValue{}
		v.Default()
		if err := v.ReadFrom(value); err != nil {
			return Record{}, fmt.Errorf("group value: %w", err)
		}
		r.Kind, r.Meta = RecGroup, v
		return r, nil
	case cgKeyVersion:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return Record{}, fmt.Errorf("consumer group key: %w", err)
		}
		r := Record{Kind: RecConsumerGroup, Group: k.Group}
		if value == nil {
			return r, nil
		}
		s, err := readCGSnapshot(value)
		if err != nil {
			return Record{}, fmt.Errorf("consumer group value: %w", err)
		}
		r.CG = s
		return r, nil
	case sgKeyVersion:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return Record{}, fmt.Errorf("share group key: %w", err)
		}
		r := Record{Kind: RecShareGroup, Group: k.Group}
		if value == nil {
			return r, nil
		}
		s, err := readSGSnapshot(value)
		if err != nil {
			return Record{}, fmt.Errorf("share group value: %w", err)
		}
		r.SG = s
		return r, nil
	case cgmKeyVersion:
		group, member, err := readMemberKey(key)
		if err != nil {
			return Record{}, fmt.Errorf("consumer group member key: %w", err)
		}
		r := Record{Kind: RecConsumerGroupMember, Group: group, Member: member}
		if value == nil {
			return r, nil
		}
		if _, _, err := decodeCGMember(value); err != nil {
			return Record{}, fmt.Errorf("consumer group member value: %w", err)
		}
		r.CGM = &cgSnapshot{raw: append([]byte(nil), value...)}
		return r, nil
	case stKeyVersion, sttKeyVersion, stmKeyVersion:
		kind := map[int16]RecordKind{stKeyVersion: RecStreamsGroup, sttKeyVersion: RecStreamsTopology, stmKeyVersion: RecStreamsMember}[version]
		var r Record
		if kind == RecStreamsMember {
			group, member, err := readMemberKey(key)
			if err != nil {
				return Record{}, fmt.Errorf("streams group member key: %w", err)
			}
			r = Record{Kind: kind, Group: group, Member: member}
		} else {
			var k kmsg.GroupMetadataKey
			if err := k.ReadFrom(key); err != nil {
				return Record{}, fmt.Errorf("streams group key: %w", err)
			}
			r = Record{Kind: kind, Group: k.Group}
		}
		if value == nil {
			return r, nil
		}
		s, err := readSTSnapshot(kind, value)
		if err != nil {
			return Record{}, fmt.Errorf("streams group value: %w", err)
		}
		r.ST = s
		return r, nil
	case txnKeyVersion:
		if len(key) < 8 {
			return Record{}, errors.New("short txn offset key")
		}
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key[:len(key)-8]); err != nil {
			return Record{}, fmt.Errorf("txn offset key: %w", err)
		}
		r := Record{Kind: RecTxnOffsetTombstone, Group: k.Group, Topic: k.Topic, Partition: k.Partition,
			ProducerID: int64(binary.BigEndian.Uint64(key[len(key)-8:]))}
		if value == nil {
			return r, nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil {
			return Record{}, fmt.Errorf("txn offset value: %w", err)
		}
		r.Kind = RecTxnOffset
		r.Offset = Offset{Offset: v.Offset, LeaderEpoch: v.LeaderEpoch, Metadata: v.Metadata, CommitTime: time.UnixMilli(v.CommitTimestamp)}
		return r, nil
	}
	return Record{}, fmt.Errorf("unknown key version %d", version)
}

// appendKeyString appends an int16-length string, as Kafka's keys encode
// theirs.
func appendKeyString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// readMemberKey parses a member record's key: version, group and member
// id, each string int16-length prefixed.
func readMemberKey(key []byte) (group, member string, err error) {
	b := key[2:]
	read := func() (string, bool) {
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
	group, ok1 = read()
	member, ok2 = read()
	if !ok1 || !ok2 || len(b) != 0 {
		return "", "", errors.New("malformed key")
	}
	return group, member, nil
}
