package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/cluster"
)

// producerIDBlock is how many ids are reserved at a time; a crash or a
// leader change skips at most this many, never reuses one.
const producerIDBlock = 1000

// producerIDsKey is the replicator key of the reservations.
const producerIDsKey = "producer-ids"

// reserveKind names the reservation command in the raft log.
const reserveKind = "producer_ids.reserve"

// reserveTimeout bounds the wait for a reservation to be committed.
const reserveTimeout = 30 * time.Second

// ProducerIDs hands out producer ids that are never reused, across restarts
// and across cluster leaders. Ids are handed out from blocks reserved in the
// replicated state; a block is this instance's only if Apply granted it
// (it started at or past every earlier reservation), so no two instances
// ever hand out from overlapping blocks.
type ProducerIDs struct {
	path string
	repl cluster.Replicator

	// resume is set by Resume and consumed by the next Next.
	resume atomic.Bool

	// alloc is held by Next, across its reservation proposal: [next, end)
	// is what is left of the block this instance was granted. Lock order:
	// alloc, then state.
	alloc struct {
		sync.Mutex
		next, end int64
	}

	// state is the replicated reservation: every id below reservedEnd is
	// in some granted block. Apply holds it (on Next's goroutine with
	// cluster.Local, on the raft FSM goroutine otherwise); it is never held
	// across a proposal.
	state struct {
		sync.Mutex
		reservedEnd int64
	}
}

// OpenProducerIDs loads the reservation from dir, for a single node.
func OpenProducerIDs(dir string) (*ProducerIDs, error) { return NewProducerIDs(dir, nil) }

// NewProducerIDs loads the reservation from dir (meta/producer-ids) and
// registers as repl's applier of key "producer-ids"; a nil repl is a
// private cluster.Local. In cluster mode call Resume whenever this node
// becomes the leader.
func NewProducerIDs(dir string, repl cluster.Replicator) (*ProducerIDs, error) {
	return newProducerIDs(filepath.Join(dir, "meta", "producer-ids"), 0, repl)
}

// nodeIDShift places a node's own producer ids far above the replicated
// allocator's, which counts up from 0.
const nodeIDShift = 40

// OpenNodeProducerIDs is a cluster node's own allocator, for idempotent
// producers that ask a follower (Kafka serves InitProducerId on any
// broker): ids in [nodeID<<40, (nodeID+1)<<40), reserved in
// dir/meta/node-producer-ids; dir must outlive restarts (not the
// raft-derived state directory).
func OpenNodeProducerIDs(dir string, nodeID int32) (*ProducerIDs, error) {
	if nodeID <= 0 || nodeID >= 1<<(62-nodeIDShift) {
		return nil, fmt.Errorf("node producer ids: node id %d out of range", nodeID)
	}
	return newProducerIDs(filepath.Join(dir, "meta", "node-producer-ids"), int64(nodeID)<<nodeIDShift, nil)
}

// shardIDShift places raft group g's transactional producer ids at
// 1<<62 + g<<shardIDShift, above every node's own (node ids stay below
// 1<<22, so theirs below 1<<62).
const shardIDShift = 52

// NewShardProducerIDs is raft group g's allocator for the transaction
// coordinator kept there (coordinators spread over raft groups): its
// reservations are replicated by the group's raft (repl) in
// dir/meta/producer-ids, and its ids never meet another group's, a
// node's or the metadata group's.
func NewShardProducerIDs(dir string, g uint8, repl cluster.Replicator) (*ProducerIDs, error) {
	if g == 0 {
		return NewProducerIDs(dir, repl)
	}
	return newProducerIDs(filepath.Join(dir, "meta", "producer-ids"), 1<<62+int64(g)<<shardIDShift, repl)
}

func newProducerIDs(path string, base int64, repl cluster.Replicator) (*ProducerIDs, error) {
	p := &ProducerIDs{path: path, repl: repl}
	p.alloc.next, p.alloc.end = base, base
	p.state.reservedEnd = base
	if p.repl == nil {
		p.repl = cluster.NewLocal()
	}
	// The registry usually made it; a node must not depend on that order.
	if err := os.MkdirAll(filepath.Dir(p.path), 0o755); err != nil {
		return nil, fmt.Errorf("create meta dir: %w", err)
	}
	raw, err := os.ReadFile(p.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read producer ids: %w", err)
	default:
		n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", p.path, err)
		}
		// Nothing is granted yet: the first Next reserves a block past n.
		n = max(n, base)
		p.alloc.next, p.alloc.end = n, n
		p.state.reservedEnd = n
	}
	p.repl.Register(producerIDsKey, p)
	return p, nil
}

// Reload reads the reservation again from its file: a snapshot installed
// on the running node (a raft follower) rewrote it. It must run where
// nothing is applied (the raft FSM goroutine, inside the restore). The
// block this instance holds is kept: a follower hands out none from it,
// and Resume moves past every reservation when the node leads. The
// reservation never moves back (a file behind the memory state is only a
// failed write, see Apply).
func (p *ProducerIDs) Reload() error {
	raw, err := os.ReadFile(p.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("reload producer ids: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return fmt.Errorf("reload producer ids: parse %s: %w", p.path, err)
	}
	p.state.Lock()
	p.state.reservedEnd = max(p.state.reservedEnd, n)
	p.state.Unlock()
	return nil
}

// Next returns a fresh producer id. When the block is used up it proposes a
// reservation and waits for it; on a node that is not the leader that fails
// with an error wrapping cluster.ErrNotLeader and kerr.NotCoordinator.
// Since it may wait for a commit, it must not run on a goroutine the raft
// FSM waits on (an AsyncApplier's actor); the transaction coordinator's
// store applies synchronously, so its actor may call it.
func (p *ProducerIDs) Next() (int64, error) {
	p.alloc.Lock()
	defer p.alloc.Unlock()
	if p.resume.Swap(false) {
		// A previous leader may have handed out ids from blocks granted
		// after ours; continuing past all of them keeps ids increasing.
		p.state.Lock()
		p.alloc.next, p.alloc.end = p.state.reservedEnd, p.state.reservedEnd
		p.state.Unlock()
	}
	if p.alloc.next >= p.alloc.end {
		if err := p.reserve(); err != nil {
			return -1, err
		}
	}
	id := p.alloc.next
	p.alloc.next++
	return id, nil
}

// Resume is called when this node becomes the cluster leader, after it has
// applied every committed reservation: the next id handed out is past every
// reserved block, so ids a previous leader handed out are never reused. It
// does not wait for a Next in progress.
func (p *ProducerIDs) Resume() { p.resume.Store(true) }

// reserve gets a new block granted. Called with alloc held, state not held.
func (p *ProducerIDs) reserve() error {
	// A grant is refused only if another reservation committed between our
	// reading reservedEnd and ours; retry a few times past it.
	for range 3 {
		p.state.Lock()
		start := max(p.alloc.next, p.state.reservedEnd)
		p.state.Unlock()
		cmd := &reserveCmd{Start: start, End: start + producerIDBlock}
		granted, err := p.propose(cmd)
		if err != nil {
			return err
		}
		if granted {
			p.alloc.next, p.alloc.end = cmd.Start, cmd.End
			return nil
		}
	}
	return fmt.Errorf("reserve producer ids: %w: concurrent reservations kept overtaking this one", kerr.NotCoordinator)
}

// propose commits cmd and reports whether Apply granted the block. An
// unknown outcome is never taken for a grant: the block is then skipped
// (every node moved past it if it committed; ids are never reused).
func (p *ProducerIDs) propose(cmd *reserveCmd) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), reserveTimeout)
	defer cancel()
	granted, err := replication.ProposeWait[bool](ctx, p.repl, producerIDsKey, cmd)
	switch {
	case err == nil:
		return granted, nil
	case errors.Is(err, replication.ErrNotLeader):
		// NOT_COORDINATOR sends a transactional client to find the
		// coordinator again; the leader reserves.
		return false, fmt.Errorf("reserve producer ids: %w: %w", kerr.NotCoordinator, err)
	case errors.Is(err, replication.ErrOutcomeUnknown) && ctx.Err() != nil:
		return false, fmt.Errorf("reserve producer ids: %w: not committed within %s: %w", kerr.RequestTimedOut, reserveTimeout, err)
	case errors.Is(err, replication.ErrOutcomeUnknown):
		// Leadership moved with the reservation in flight.
		return false, fmt.Errorf("reserve producer ids: %w: %w", kerr.NotCoordinator, err)
	}
	return false, fmt.Errorf("reserve producer ids: %w", err)
}

// reserveCmd reserves [Start, End).
type reserveCmd struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

func (*reserveCmd) CommandKind() string { return reserveKind }

func (c *reserveCmd) AppendCommand(b []byte) []byte {
	// Two int64s always marshal.
	raw, _ := json.Marshal(c)
	return append(b, raw...)
}

func init() {
	cluster.RegisterDecoder(reserveKind, func(payload []byte) (cluster.Command, error) {
		c := new(reserveCmd)
		if err := json.Unmarshal(payload, c); err != nil {
			return nil, err
		}
		return c, nil
	})
}

// Apply implements cluster.Applier: it raises reservedEnd to the command's
// end, persists it, and returns whether the block is granted (true when it
// starts at or past every earlier reservation, so it overlaps none), or a
// persist error (the proposer then does not use the block). It runs on
// every node in commit order and depends only on the command and the
// replicated state.
func (p *ProducerIDs) Apply(cmd cluster.Command) any {
	c, ok := cmd.(*reserveCmd)
	if !ok {
		return fmt.Errorf("producer ids: unexpected command %T", cmd)
	}
	p.state.Lock()
	defer p.state.Unlock()
	granted := c.Start >= p.state.reservedEnd && c.End > c.Start
	if c.End <= p.state.reservedEnd {
		return granted
	}
	// The memory state moves even if the write fails, so every node keeps
	// the same reservedEnd; the file only has to be at least as far when
	// it is next read.
	p.state.reservedEnd = c.End
	if err := topics.WriteFileAtomic(p.path, []byte(strconv.FormatInt(c.End, 10))); err != nil {
		return fmt.Errorf("persist producer id reservation: %w", err)
	}
	return granted
}
