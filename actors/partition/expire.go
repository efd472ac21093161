package partition

import (
	"encoding/binary"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage/logconfig"
)

// kindExpire names the replicated producer-expiry pass (part of the raft
// log's format: never renamed).
const kindExpire = "partition.expire_producers"

func init() { replication.RegisterDecoder(kindExpire, decodeExpire) }

// expireCmd is the replicated form of a producer-expiry pass: the leader
// sees on its clock that some producer's state is past
// producer.id.expiration.ms (State.ExpiryDue) and proposes the pass with
// that clock and expiration; every node drops exactly the same producers
// at the same point of the log (State.ExpireProducers), whatever its own
// clock or config. Followers never expire on their own.
type expireCmd struct {
	now          int64 // the proposer's clock, unix nanoseconds
	expirationMs int64 // the proposer's producer.id.expiration.ms
}

const expireLen = 8 + 8 // now, expiration

// expireResult is the outcome of applying an expireCmd.
type expireResult struct{ expired int }

// CommandKind implements replication.Encodable.
func (c *expireCmd) CommandKind() string { return kindExpire }

// AppendCommand implements replication.Encodable.
func (c *expireCmd) AppendCommand(b []byte) []byte {
	b = slices.Grow(b, 1+expireLen)
	b = append(b, commandVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(c.now))
	return binary.BigEndian.AppendUint64(b, uint64(c.expirationMs))
}

func decodeExpire(p []byte) (replication.Command, error) {
	body, err := commandBody(p, expireLen, false)
	if err != nil {
		return nil, err
	}
	c := &expireCmd{now: int64(binary.BigEndian.Uint64(body)), expirationMs: int64(binary.BigEndian.Uint64(body[8:]))}
	if c.expirationMs < 1 {
		return nil, errors.New("producer expiration below 1 ms")
	}
	return c, nil
}

// expire applies a pass. Actor goroutine.
func (a *partitionActor) expire(c *expireCmd) expireResult {
	n := a.sl.st.ExpireProducers(time.Unix(0, c.now).UnixMilli(), c.expirationMs)
	if n > 0 {
		a.logger.Info("producer state expired", "producers", n, "expiration_ms", c.expirationMs)
		// The pass is not in the partition's log: a restart rebuilding
		// from an older snapshot and the log would bring the dropped
		// producers back (until the leader's next pass). Snapshot now.
		a.snapshot()
	}
	return expireResult{expired: n}
}

// proposeExpiry proposes an expiry pass when one is due at now (leader
// only; see expireCmd), one in flight at a time. With Local it is applied
// inside Propose, on this goroutine.
func (a *partitionActor) proposeExpiry(now time.Time) {
	ms := a.sl.st.Config().ProducerIDExpirationMs
	if a.expiring.Load() || !a.sl.st.ExpiryDue(now.UnixMilli(), ms) {
		return
	}
	cmd := &expireCmd{now: now.UnixNano(), expirationMs: ms}
	if cmd.expirationMs < 1 {
		cmd.expirationMs = logconfig.DefaultProducerIDExpirationMs
	}
	proposePass[expireResult](a, &a.expiring, cmd, "producer expiry")
}

// proposePass proposes a maintenance pass (expiry, eviction) whose result
// only says how it went, one at a time: busy is set until its done. With
// Local it is applied inside Propose, on this goroutine.
func proposePass[R any](a *partitionActor, busy *atomic.Bool, cmd replication.Command, what string) {
	busy.Store(true)
	defer func() {
		// Local applies inside Propose: a panic there must not take the
		// actor's message loop with it.
		if r := recover(); r != nil {
			busy.Store(false)
			a.logger.Error(what+" proposal panicked", "panic", r)
		}
	}()
	replication.Propose(a.repl, a.key, cmd, func(_ R, err error) {
		busy.Store(false)
		switch {
		case errors.Is(err, replication.ErrNotLeader):
			a.logger.Debug(what+" proposal refused", "err", err)
		case err != nil:
			a.logger.Warn(what+" proposal failed", "err", err)
		}
	})
}
