package group

// The persisted records. Offsets and classic group metadata use Kafka's own
// __consumer_offsets key and value encodings (kmsg's OffsetCommitKey/Value,
// GroupMetadataKey/Value), so a record reads the same as in Kafka; KIP-848
// group state uses a key version Kafka does not (cgKeyVersion) and this
// package's own value encoding.

import (
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
)

// Record is one persisted change of a group.
type Record struct {
	Kind      RecordKind
	Group     string
	Topic     string // RecOffset, RecOffsetTombstone
	Partition int32
	Offset    Offset                   // RecOffset
	Meta      *kmsg.GroupMetadataValue // RecGroup
	CG        *cgSnapshot              // RecConsumerGroup
}

// Key versions, as in __consumer_offsets: 1 offset commit, 2 group
// metadata. cgKeyVersion is ours: KIP-848 group state (key: the group id).
const (
	offsetKeyVersion = 1
	groupKeyVersion  = 2
	cgKeyVersion     = 0x7e01
)

// storeKey identifies what a record replaces: records with the same key
// supersede each other, so compaction keeps the last of each.
func (r *Record) storeKey() string {
	switch r.Kind {
	case RecOffset, RecOffsetTombstone:
		return fmt.Sprintf("o\x00%s\x00%s\x00%d", r.Group, r.Topic, r.Partition)
	case RecConsumerGroup:
		return "c\x00" + r.Group
	default:
		return "g\x00" + r.Group
	}
}

// tombstone: the record deletes its key.
func (r *Record) tombstone() bool {
	return r.Kind == RecOffsetTombstone || r.Kind == RecGroupTombstone || (r.Kind == RecConsumerGroup && r.CG == nil)
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
	}
	return Record{}, fmt.Errorf("unknown key version %d", version)
}
