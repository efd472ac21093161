package group

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/regent-broker/regent/storage/logconfig"
)

// Config holds the coordinator's tunables. A zero field means Kafka's
// default, except InitialRebalanceDelay, where zero is a legal value: use
// DefaultConfig (or ConfigFromBroker) to start from the defaults.
type Config struct {
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: how long a
	// group's first rebalance waits for more members (extended by each new
	// member, up to the rebalance timeout).
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound what a classic member
	// may ask for (group.min/max.session.timeout.ms).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// NewMemberJoinTimeout bounds how long a new member's JoinGroup may wait
	// in a rebalance before the member is dropped (Kafka: 5 minutes).
	NewMemberJoinTimeout time.Duration
	// MaxSize is group.max.size.
	MaxSize int
	// Pending bounds the pending member ids (KIP-394) of every group of
	// the manager together (pending.go); nil: unbounded. NewManager sets
	// one of DefaultMaxPendingIDs when it is nil.
	Pending *PendingBudget
	// MaxMetadataBytes is offset.metadata.max.bytes.
	MaxMetadataBytes int
	// OffsetsRetention is offsets.retention.minutes: how long the offsets of
	// an empty group (or a simple group's offsets) are kept.
	OffsetsRetention time.Duration
	// RetentionCheck is offsets.retention.check.interval.ms.
	RetentionCheck time.Duration

	// KIP-848 consumer groups.
	// ConsumerSessionTimeout is group.consumer.session.timeout.ms.
	ConsumerSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms.
	ConsumerHeartbeatInterval time.Duration
	// GroupConsumerTimeouts, if set, gives a group's own
	// consumer.session.timeout.ms and consumer.heartbeat.interval.ms (its
	// GROUP configs; zero: not set, the two above apply). Called from the
	// group's actor; must be cheap and safe from any goroutine.
	GroupConsumerTimeouts func(group string) (session, heartbeat time.Duration)

	// KIP-932 share groups.
	// ShareSessionTimeout is group.share.session.timeout.ms.
	ShareSessionTimeout time.Duration
	// ShareHeartbeatInterval is group.share.heartbeat.interval.ms.
	ShareHeartbeatInterval time.Duration
	// ShareMaxSize is group.share.max.size: members per share group.
	ShareMaxSize int
	// GroupShareTimeouts, if set, gives a group's own
	// share.session.timeout.ms and share.heartbeat.interval.ms (zero: not
	// set, the two above apply). Same contract as GroupConsumerTimeouts.
	GroupShareTimeouts func(group string) (session, heartbeat time.Duration)

	// KIP-1071 streams groups.
	// StreamsSessionTimeout is group.streams.session.timeout.ms.
	StreamsSessionTimeout time.Duration
	// StreamsHeartbeatInterval is group.streams.heartbeat.interval.ms.
	StreamsHeartbeatInterval time.Duration
	// StreamsStandbyReplicas is group.streams.num.standby.replicas.
	StreamsStandbyReplicas int
	// GroupStreamsConfigs, if set, gives a group's own
	// streams.session.timeout.ms, streams.heartbeat.interval.ms (zero:
	// not set) and streams.num.standby.replicas (negative: not set).
	// Same contract as GroupConsumerTimeouts.
	GroupStreamsConfigs func(group string) (session, heartbeat time.Duration, standbys int)

	// NewMemberID makes a member id from a prefix (the client id or the
	// instance id); tests inject a deterministic one.
	NewMemberID func(prefix string) string
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		InitialRebalanceDelay:     3 * time.Second,
		MinSessionTimeout:         6 * time.Second,
		MaxSessionTimeout:         30 * time.Minute,
		NewMemberJoinTimeout:      5 * time.Minute,
		MaxSize:                   math.MaxInt32,
		MaxMetadataBytes:          4096,
		OffsetsRetention:          7 * 24 * time.Hour,
		RetentionCheck:            10 * time.Minute,
		ConsumerSessionTimeout:    45 * time.Second,
		ConsumerHeartbeatInterval: 5 * time.Second,
		ShareSessionTimeout:       45 * time.Second,
		ShareHeartbeatInterval:    5 * time.Second,
		ShareMaxSize:              200,
		StreamsSessionTimeout:     45 * time.Second,
		StreamsHeartbeatInterval:  5 * time.Second,
		NewMemberID:               randomMemberID,
	}
}

// ConfigFromBroker reads the group keys of the broker's config, falling
// back to Kafka's defaults for keys not set.
func ConfigFromBroker(b logconfig.Broker) (Config, error) {
	c := DefaultConfig()
	ms := func(key string, dst *time.Duration, unit time.Duration, min int64) error {
		v, ok := b.Overrides[key]
		if !ok {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < min {
			return fmt.Errorf("broker config %s=%q: want an integer >= %d", key, v, min)
		}
		*dst = time.Duration(n) * unit
		return nil
	}
	for _, k := range []struct {
		key  string
		dst  *time.Duration
		unit time.Duration
		min  int64
	}{
		{"group.initial.rebalance.delay.ms", &c.InitialRebalanceDelay, time.Millisecond, 0},
		{"group.min.session.timeout.ms", &c.MinSessionTimeout, time.Millisecond, 0},
		{"group.max.session.timeout.ms", &c.MaxSessionTimeout, time.Millisecond, 1},
		{"offsets.retention.minutes", &c.OffsetsRetention, time.Minute, 1},
		{"offsets.retention.check.interval.ms", &c.RetentionCheck, time.Millisecond, 1},
		{"group.consumer.session.timeout.ms", &c.ConsumerSessionTimeout, time.Millisecond, 1},
		{"group.consumer.heartbeat.interval.ms", &c.ConsumerHeartbeatInterval, time.Millisecond, 1},
		{"group.share.session.timeout.ms", &c.ShareSessionTimeout, time.Millisecond, 1},
		{"group.share.heartbeat.interval.ms", &c.ShareHeartbeatInterval, time.Millisecond, 1},
		{"group.streams.session.timeout.ms", &c.StreamsSessionTimeout, time.Millisecond, 1},
		{"group.streams.heartbeat.interval.ms", &c.StreamsHeartbeatInterval, time.Millisecond, 1},
	} {
		if err := ms(k.key, k.dst, k.unit, k.min); err != nil {
			return c, err
		}
	}
	for _, k := range []struct {
		key string
		dst *int
	}{
		{"group.max.size", &c.MaxSize},
		{"offset.metadata.max.bytes", &c.MaxMetadataBytes},
		{"group.share.max.size", &c.ShareMaxSize},
	} {
		if v, ok := b.Overrides[k.key]; ok {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1 {
				return c, fmt.Errorf("broker config %s=%q: want a positive integer", k.key, v)
			}
			*k.dst = int(n)
		}
	}
	if v, ok := b.Overrides["group.streams.num.standby.replicas"]; ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return c, fmt.Errorf("broker config group.streams.num.standby.replicas=%q: want an integer >= 0", v)
		}
		c.StreamsStandbyReplicas = int(n)
	}
	return c, c.Validate()
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.InitialRebalanceDelay < 0 {
		return fmt.Errorf("group.initial.rebalance.delay.ms must not be negative")
	}
	if c.MinSessionTimeout > c.MaxSessionTimeout {
		return fmt.Errorf("group.min.session.timeout.ms (%v) exceeds group.max.session.timeout.ms (%v)", c.MinSessionTimeout, c.MaxSessionTimeout)
	}
	if c.ConsumerHeartbeatInterval >= c.ConsumerSessionTimeout {
		return fmt.Errorf("group.consumer.heartbeat.interval.ms (%v) must be below group.consumer.session.timeout.ms (%v)", c.ConsumerHeartbeatInterval, c.ConsumerSessionTimeout)
	}
	if c.ShareHeartbeatInterval >= c.ShareSessionTimeout {
		return fmt.Errorf("group.share.heartbeat.interval.ms (%v) must be below group.share.session.timeout.ms (%v)", c.ShareHeartbeatInterval, c.ShareSessionTimeout)
	}
	if c.StreamsHeartbeatInterval >= c.StreamsSessionTimeout {
		return fmt.Errorf("group.streams.heartbeat.interval.ms (%v) must be below group.streams.session.timeout.ms (%v)", c.StreamsHeartbeatInterval, c.StreamsSessionTimeout)
	}
	if c.ShareMaxSize > 1000 {
		// Kafka's bound on group.share.max.size.
		return fmt.Errorf("group.share.max.size (%d) must be at most 1000", c.ShareMaxSize)
	}
	return nil
}

// withDefaults fills zero fields (other than InitialRebalanceDelay) with
// the defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MinSessionTimeout == 0 && c.MaxSessionTimeout == 0 {
		c.MinSessionTimeout, c.MaxSessionTimeout = d.MinSessionTimeout, d.MaxSessionTimeout
	}
	if c.NewMemberJoinTimeout == 0 {
		c.NewMemberJoinTimeout = d.NewMemberJoinTimeout
	}
	if c.MaxSize == 0 {
		c.MaxSize = d.MaxSize
	}
	if c.MaxMetadataBytes == 0 {
		c.MaxMetadataBytes = d.MaxMetadataBytes
	}
	if c.OffsetsRetention == 0 {
		c.OffsetsRetention = d.OffsetsRetention
	}
	if c.RetentionCheck == 0 {
		c.RetentionCheck = d.RetentionCheck
	}
	if c.ConsumerSessionTimeout == 0 {
		c.ConsumerSessionTimeout = d.ConsumerSessionTimeout
	}
	if c.ConsumerHeartbeatInterval == 0 {
		c.ConsumerHeartbeatInterval = d.ConsumerHeartbeatInterval
	}
	if c.ShareSessionTimeout == 0 {
		c.ShareSessionTimeout = d.ShareSessionTimeout
	}
	if c.ShareHeartbeatInterval == 0 {
		c.ShareHeartbeatInterval = d.ShareHeartbeatInterval
	}
	if c.ShareMaxSize == 0 {
		c.ShareMaxSize = d.ShareMaxSize
	}
	if c.StreamsSessionTimeout == 0 {
		c.StreamsSessionTimeout = d.StreamsSessionTimeout
	}
	if c.StreamsHeartbeatInterval == 0 {
		c.StreamsHeartbeatInterval = d.StreamsHeartbeatInterval
	}
	if c.NewMemberID == nil {
		c.NewMemberID = d.NewMemberID
	}
	return c
}

// randomMemberID is Kafka's form: prefix, a dash, a random UUID.
func randomMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return prefix + "-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
