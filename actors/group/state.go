package group

import (
	"bytes"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/internal/smallmap"
)

// State is a group's state, named as Kafka names it.
type State int8

const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
	// KIP-848 consumer group states.
	Assigning
	Reconciling
	// NotReady: a KIP-1071 streams group whose topology's topics are
	// missing or wrongly partitioned.
	NotReady
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	case Assigning:
		return "Assigning"
	case Reconciling:
		return "Reconciling"
	case NotReady:
		return "NotReady"
	}
	return "Unknown"
}

// Ref names a request waiting for its answer. The shell around the state
// machine maps refs to reply callbacks; the state machine answers every ref
// it is given exactly once, in some Effects' Replies.
type Ref uint64

// Reply is a response to deliver.
type Reply struct {
	To   Ref
	Resp kmsg.Response
}

// Effects is what one step of the state machine asks its shell to do, in
// this order: persist Records (then hand them back through Applied), then
// deliver Replies. Timers are not effects: after every step the shell asks
// NextDeadline and arranges a Tick for it.
type Effects struct {
	Records []Record
	Replies []Reply
	// ShareMembersGone are share-group members that left, were fenced or
	// expired in this step; ShareGroupDeleted: the share group was
	// deleted (once its records are persisted). The shell tells the
	// Manager's share listeners.
	ShareMembersGone  []string
	ShareGroupDeleted bool
}

// Client identifies the connection a request came on.
type Client struct {
	ID   string // the request header's client id
	Host string // Kafka's form: "/" + the peer's IP
}

type protocol struct {
	name     string
	metadata []byte
}

// member is a classic-protocol member.
type member struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	protocolType     string
	protocols        []protocol // in the member's order of preference
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	assignment       []byte

	joinRef Ref // a JoinGroup waiting for the join phase to end; 0: none
	syncRef Ref // a SyncGroup waiting for the leader's assignment; 0: none
	// isNew: joined in the current rebalance and not yet answered; such a
	// member expires NewMemberJoinTimeout after joining even while waiting.
	isNew bool
	// deadline is when the member's session ends without a heartbeat; zero
	// while no expiry is scheduled (waiting members don't expire).
	deadline time.Time
}

func (m *member) matches(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i, p := range ps {
		if p.Name != m.protocols[i].name || !bytes.Equal(p.Metadata, m.protocols[i].metadata) {
			return false
		}
	}
	return true
}

func (m *member) supports(name string) bool {
	for _, p := range m.protocols {
		if p.name == name {
			return true
		}
	}
	return false
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

func protocolsOf(ps []kmsg.JoinGroupRequestProtocol) []protocol {
	out := make([]protocol, len(ps))
	for i, p := range ps {
		// Requests alias the network buffer: keep a copy.
		out[i] = protocol{name: p.Name, metadata: bytes.Clone(p.Metadata)}
	}
	return out
}

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

// Offset is a committed offset.
type Offset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTime  time.Time
	ExpireTime  time.Time // zero: none (only v1-v4 commits set one)
}

// Group is one group's state: the classic protocol's membership and the
// committed offsets (and, for KIP-848 groups, the consumer protocol's
// state). It does no IO and reads no clock: every entry point takes now and
// returns Effects. Owned by the group's actor.
//
// Invariants (checked by checkInvariants in tests):
//   - awaitingJoin == the number of members with joinRef != 0;
//   - every member of static maps back to a member with that instance id;
//   - leader is "" iff there are no members, else a member's id;
//   - state is Empty iff there are no members, except in
//     PreparingRebalance (members may all leave during the join phase).
type Group struct {
	id  string
	cfg *Config

	// live: the group exists as Kafka sees it (created by a join or a
	// commit, or loaded), as opposed to a name nobody has used.
	live       bool
	state      State
	prevState  State // the state PreparingRebalance was entered from
	stateSince time.Time

	protocolType string // "" for a group that only stores offsets
	protocol     string // the selected protocol; "" when none
	generation   int32
	leader       string

	members map[string]*member
	order   []*member         // members in join order
	static  map[string]string // instance id -> member id
	// pending are member ids handed out with MEMBER_ID_REQUIRED, with
	// when they expire if not used; pendingQ orders them by that
	// deadline (pending.go).
	pending      map[string]time.Time
	pendingQ     pendingQueue
	pendingSync  map[string]struct{} // members yet to SyncGroup this generation
	awaitingJoin int

	// Join phase (PreparingRebalance).
	joinDeadline     time.Time
	initialPhase     bool // the first rebalance out of Empty: delayed
	initialDelay     time.Duration
	initialRemaining time.Duration
	newMemberAdded   bool
	// syncDeadline ends the wait for members' SyncGroup.
	syncDeadline time.Time

	// subscribed is the union of consumer-protocol members' topics; nil
	// with subscribedKnown false when a subscription did not parse.
	subscribed      map[string]struct{}
	subscribedKnown bool

	// offsets is a smallmap: most groups commit a few partitions, and a
	// Go map spends eight slots (~930 bytes) on the first.
	offsets smallmap.Map[tp, Offset]
	// pendingTxn holds offsets staged by transactions, by producer id.
	pendingTxn map[int64]map[tp]Offset

	// cg is the KIP-848 state when the group is a consumer group.
	cg *consumerGroup
	// sg is the KIP-932 state when the group is a share group.
	sg *shareGroup
	// st is the KIP-1071 state when the group is a streams group.
	st *streamsGroup

	eff Effects
}

// NewGroup makes the state of a group nobody has used yet. Its maps are
// made at their first entry: most groups that exist only hold offsets.
func NewGroup(id string, cfg *Config) *Group {
	return &Group{id: id, cfg: cfg}
}

// ID is the group id.
func (g *Group) ID() string { return g.id }

// Live reports whether the group exists (Kafka would list it).
func (g *Group) Live() bool { return g.live }

// State is the group's state.
func (g *Group) State() State { return g.state }

// Generation is the classic generation (or, for consumer groups, the
// group epoch).
func (g *Group) Generation() int32 {
	if g.cg != nil {
		return g.cg.epoch
	}
	if g.st != nil {
		return g.st.epoch
	}
	if g.sg != nil {
		return g.sg.epoch
	}
	return g.generation
}

func (g *Group) take() Effects {
	e := g.eff
	g.eff = Effects{}
	return e
}

func (g *Group) reply(to Ref, resp kmsg.Response) {
	if to == 0 {
		return
	}
	g.eff.Replies = append(g.eff.Replies, Reply{To: to, Resp: resp})
}

func (g *Group) record(r Record) { g.eff.Records = append(g.eff.Records, r) }

func (g *Group) transition(s State, now time.Time) {
	if s == PreparingRebalance {
		g.prevState = g.state
	}
	g.state = s
	g.stateSince = now
}

// create makes the group exist (in Empty) if it does not yet.
func (g *Group) create(now time.Time) {
	if g.live {
		return
	}
	g.live = true
	g.state = Empty
	g.stateSince = now
}

// reset forgets everything: the group no longer exists.
func (g *Group) reset() {
	*g = *NewGroup(g.id, g.cfg)
}

func (g *Group) addToGroup(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	if g.members == nil {
		g.members = map[string]*member{}
	}
	g.members[m.id] = m
	g.order = append(g.order, m)
	if m.instanceID != nil {
		if g.static == nil {
			g.static = map[string]string{}
		}
		g.static[*m.instanceID] = m.id
	}
	if m.joinRef != 0 {
		g.awaitingJoin++
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.dropPending(m.id)
}

// removeFromGroup drops a member; its waiting requests must have been
// answered by the caller.
func (g *Group) removeFromGroup(id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	if m.joinRef != 0 {
		g.awaitingJoin--
	}
	delete(g.members, id)
	for i, o := range g.order {
		if o == m {
			g.order = append(g.order[:i], g.order[i+1:]...)
			break
		}
	}
	if m.instanceID != nil && g.static[*m.instanceID] == id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0].id
		}
	}
	g.dropPending(id)
	delete(g.pendingSync, id)
}

func (g *Group) allJoined() bool {
	return g.awaitingJoin == len(g.members) && len(g.pending) == 0
}

func (g *Group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.order {
		if m.rebalanceTimeout > d {
			d = m.rebalanceTimeout
		}
	}
	return d
}

// NextDeadline is the earliest time at which Tick has work to do; zero if
// none.
func (g *Group) NextDeadline() time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	consider(g.joinDeadline)
	consider(g.syncDeadline)
	for _, m := range g.order {
		consider(m.deadline)
	}
	if p, ok := g.nextPending(); ok {
		consider(p.at)
	}
	if g.cg != nil {
		consider(g.cg.nextDeadline())
	}
	if g.sg != nil {
		consider(g.sg.nextDeadline())
	}
	if g.st != nil {
		consider(g.st.nextDeadline())
	}
	return next
}

// Tick runs whatever is due at now: the end of a join phase, sync and
// session expiries.
func (g *Group) Tick(now time.Time) Effects {
	g.advance(now)
	return g.take()
}

// advance processes every deadline at or before now. Entry points call it
// last, so a deadline that has already passed (a zero initial delay) takes
// effect without waiting for the timer.
func (g *Group) advance(now time.Time) {
	if g.cg != nil {
		g.cg.advance(g, now)
		return
	}
	if g.sg != nil {
		g.sg.advance(g, now)
		return
	}
	if g.st != nil {
		g.st.advance(now)
		g.recordST()
		return
	}
	// Each pass may schedule new deadlines in the past (never, with sane
	// configs, but a zero delay schedules "now"); bound the loop anyway.
	for i := 0; i < 64; i++ {
		progressed := false
		if !g.joinDeadline.IsZero() && !now.Before(g.joinDeadline) {
			g.joinDeadline = time.Time{}
			g.onJoinDeadline(now)
			progressed = true
		}
		if !g.syncDeadline.IsZero() && !now.Before(g.syncDeadline) {
			g.syncDeadline = time.Time{}
			g.onSyncDeadline(now)
			progressed = true
		}
		if g.expireDuePending(now) {
			progressed = true
		}
		for _, m := range append([]*member(nil), g.order...) {
			if !m.deadline.IsZero() && !now.Before(m.deadline) {
				m.deadline = time.Time{}
				g.expireSession(m, now)
				progressed = true
			}
		}
		if !progressed {
			return
		}
	}
}
