package protocol

// What the share-group data path (ShareFetch, ShareAcknowledge and the
// share-offset admin APIs) needs of the rest of the broker: the
// share-partition manager (actors/share), the share sessions and the
// share.version feature that turns share groups on, as in Kafka 4.3.

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/features"
	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/actors/share"
	"github.com/regent-broker/regent/actors/topics"
)

// ShareCore is the share-partition manager (*share.Manager). Each method
// calls reply exactly once, off the caller's goroutine; reply must not
// block.
type ShareCore interface {
	Acquire(req share.AcquireRequest, reply func(share.AcquireResult))
	Acknowledge(k share.Key, member string, acks []share.AckBatch, reply func(errorCode int16))
	ReleaseMember(k share.Key, member string, reply func(errorCode int16))
	ReleaseGroupMember(group, member string, reply func(errorCode int16))
	StartOffsets(group string, parts []share.TopicPartition, reply func([]share.StartOffset))
	AlterStartOffsets(group string, offs []share.StartOffset, reply func([]share.StartOffsetResult))
	DeleteState(group string, topics []string, reply func(errorCode int16))
	DeleteGroup(group string, reply func(errorCode int16))
}

// shareState is the server's share-group data path; nil until SetShare.
type shareState struct {
	core     ShareCore
	sessions *shareSessions
	// released wakes the group's waiting fetches when records of theirs
	// may have become available through this node (shareReleased).
	released shareWake
	// config gives a group's share configs in force (nil: Kafka's
	// defaults); AcquisitionLockTimeoutMs answers its lock duration.
	config func(group string) share.Config
}

// SetShare installs the share-partition manager and where a group's share
// configs come from (nil: Kafka's defaults). A nil core means share groups
// are not served: their APIs are not advertised and answer
// UNSUPPORTED_VERSION. Call before serving.
func (s *Server) SetShare(core ShareCore, config func(group string) share.Config) {
	if core == nil {
		s.share = nil
		return
	}
	st := &shareState{core: core, sessions: newShareSessions(defaultMaxShareSessions), config: config}
	st.released.mu.m = map[string]map[*partition.Waiter]struct{}{}
	if n, ok := core.(availableNotifier); ok {
		// Lock expiries, and releases through any path, wake the
		// group's waiting fetches.
		n.SetAvailableListener(func(k share.Key) { st.released.wake(k.Group) })
	}
	s.share = st
}

// availableNotifier is a ShareCore that tells when records became
// available to acquire without an append (*share.Manager).
type availableNotifier interface {
	SetAvailableListener(fn func(share.Key))
}

// shareWake parks waiting ShareFetches by group, to be woken when records
// of the group may have become available without an append: locks
// expired, records released or given back by a departed member (the share
// manager tells, availableNotifier; the handlers also wake on the
// releases they ask for). Safe from any goroutine.
type shareWake struct {
	mu struct {
		sync.Mutex
		m map[string]map[*partition.Waiter]struct{}
	}
}

func (w *shareWake) add(group string, wt *partition.Waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := w.mu.m[group]
	if ws == nil {
		ws = map[*partition.Waiter]struct{}{}
		w.mu.m[group] = ws
	}
	ws[wt] = struct{}{}
}

func (w *shareWake) remove(group string, wt *partition.Waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ws := w.mu.m[group]; ws != nil {
		delete(ws, wt)
		if len(ws) == 0 {
			delete(w.mu.m, group)
		}
	}
}

// wake signals the group's waiting fetches; it never blocks.
func (w *shareWake) wake(group string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wt := range w.mu.m[group] {
		select {
		case wt.C <- struct{}{}:
		default:
		}
	}
}

// shareReleased tells group's waiting fetches that records may be
// available again.
func (s *Server) shareReleased(group string) {
	if st := s.share; st != nil {
		st.released.wake(group)
	}
}

// shareLockMs is group's acquisition lock duration in milliseconds.
func (s *Server) shareLockMs(group string) int32 {
	if st := s.share; st != nil && st.config != nil {
		if d := st.config(group).RecordLockDuration; d > 0 {
			return int32(min(d.Milliseconds(), 1<<31-1))
		}
	}
	return shareDefaultLockMs
}

// shareOn reports whether share groups are served: a share-partition
// manager is installed and share.version is finalized at 1 or more (as
// Kafka 4.3's brokers serve share groups only then; a new cluster starts
// at 1).
func (s *Server) shareOn() bool {
	if s.share == nil {
		return false
	}
	return s.features == nil || s.features.Finalized().Level(features.ShareVersion) >= 1
}

// isShareKey reports whether key is one of the share-group APIs, which
// ApiVersions advertises only while shareOn.
func isShareKey(key int16) bool {
	switch key {
	case 76, 77, 78, 79, 90, 91, 92:
		return true
	}
	return false
}

// ShareMemberLeft releases the records a member that left its group or
// was fenced held on every share-partition of the group, unless its
// share session is still open on a connection: then the session's end
// (its final-epoch ShareFetch or ShareAcknowledge, or the connection's
// close) releases them, as Kafka releases a member's records when its
// share session ends, not at its group leave. A closing client sends its
// leave heartbeat and its last acknowledgements at the same moment on two
// connections (librdkafka does): releasing at the leave gave its
// acknowledged records to other members, and its acknowledgements found
// no session. A session with no known connection is closed here as
// before. Safe from any goroutine; does not block.
func (s *Server) ShareMemberLeft(group, member string) {
	st := s.share
	if st == nil {
		return
	}
	if st.sessions.openOnConn(group, member) {
		return
	}
	st.sessions.closeMember(group, member)
	st.core.ReleaseGroupMember(group, member, func(code int16) {
		s.shareReleased(group)
		if code != 0 {
			s.log.Warn("share: releasing a departed member's records failed", "group", group, "member", member, "error", kerr.ErrorForCode(code))
		}
	})
}

// ConnClosed ends the share sessions connection id opened and releases
// the records their members held, as Kafka does when a share consumer's
// connection closes. netio calls it once per closed connection, on the
// connection's loop: it does not block.
func (s *Server) ConnClosed(id uint64) {
	st := s.share
	if st == nil {
		return
	}
	for k, parts := range st.sessions.closeConn(id) {
		s.releaseParts(k.group, k.member, parts)
	}
}

// ShareGroupDeleted closes the sessions of a deleted share group. Its
// share-partition state is dropped by the share manager (wired beside).
func (s *Server) ShareGroupDeleted(group string) {
	if st := s.share; st != nil {
		st.sessions.closeGroup(group)
	}
}

// releaseParts gives back member's acquired records on parts (its session
// closed, was replaced, or forgot them); failures are only logged, the
// records' locks expire anyway.
func (s *Server) releaseParts(group, member string, parts []sharePart) {
	st := s.share
	for _, p := range parts {
		if p.topic == "" {
			continue
		}
		k := share.Key{Group: group, Topic: p.topic, TopicID: p.topicID, Partition: p.partition}
		st.core.ReleaseMember(k, member, func(code int16) {
			s.shareReleased(group)
			if code != 0 && code != kerr.UnknownTopicOrPartition.Code {
				s.log.Warn("share: releasing a member's records failed", slog.String("group", group), slog.String("member", member),
					slog.String("topic", k.Topic), slog.Int("partition", int(k.Partition)), slog.Any("error", kerr.ErrorForCode(code)))
			}
		})
	}
}

// shareAcks converts a request's acknowledgement batches, checking what
// Kafka checks: offsets in order, one type for the range or one per
// offset, known types, RENEW only in a request that says it has renewals.
func shareAcks(n int, at func(i int) (first, last int64, types []int8), renew bool) ([]share.AckBatch, error) {
	out := make([]share.AckBatch, 0, n)
	prevLast := int64(-1)
	for i := 0; i < n; i++ {
		first, last, types := at(i)
		switch {
		case first < 0 || last < first:
			return nil, fmt.Errorf("acknowledgement batch %d..%d is not a range", first, last)
		case first <= prevLast:
			return nil, fmt.Errorf("acknowledgement batches overlap or are out of order at offset %d", first)
		case len(types) != 1 && int64(len(types)) != last-first+1:
			return nil, fmt.Errorf("acknowledgement batch %d..%d has %d types, want 1 or %d", first, last, len(types), last-first+1)
		}
		b := share.AckBatch{First: first, Last: last, Types: make([]share.AckType, len(types))}
		for j, t := range types {
			if t < 0 || t > 4 || (t == 4 && !renew) {
				return nil, fmt.Errorf("acknowledge type %d is not valid here", t)
			}
			b.Types[j] = share.AckType(t)
		}
		out = append(out, b)
		prevLast = last
	}
	return out, nil
}

// shareGroupCheck is the admin APIs' check of a group, asked of its
// coordinator: reply gets 0 when it is a share group (and, with needEmpty,
// has no members), else Kafka's code and message: GROUP_ID_NOT_FOUND for
// no group or one of another type, NON_EMPTY_GROUP for members,
// NOT_COORDINATOR on a node that does not serve. With create, a group
// that does not exist is made, an empty share group (needEmpty holds for
// it). A member joining right after the check is not seen (Kafka checks
// inside the coordinator's write, Regent just before it).
func (s *Server) shareGroupCheck(group string, needEmpty, create bool, reply func(code int16, msg string)) {
	ask := s.groupsFor(group).ShareGroupEmpty
	if create {
		ask = s.groupsFor(group).EnsureShareGroup
	}
	ask(group, func(code int16) {
		switch {
		case code == kerr.NonEmptyGroup.Code && !needEmpty:
			reply(0, "")
		case code == kerr.NonEmptyGroup.Code:
			reply(code, "The group "+group+" is not empty: its members must leave first.")
		case code == kerr.GroupIDNotFound.Code:
			reply(code, "Group "+group+" is not a share group.")
		default:
			reply(code, "")
		}
	})
}

// shareOffsetsGate is what AlterShareGroupOffsets and
// DeleteShareGroupOffsets check before their work: share groups on, op on
// the group, then shareGroupCheck (an empty share group; with create, made
// when absent). fail gets the first code that refuses; else next runs.
func (s *Server) shareOffsetsGate(r *Request, group string, op kmsg.ACLOperation, create bool, fail func(code int16, msg *string), next func()) {
	switch {
	case !s.shareOn():
		fail(kerr.UnsupportedVersion.Code, nil)
		return
	case !s.authorized(r, op, acls.Group, group):
		fail(kerr.GroupAuthorizationFailed.Code, nil)
		return
	}
	s.shareGroupCheck(group, true, create, func(code int16, msg string) {
		switch {
		case code == 0:
			next()
		case msg != "":
			fail(code, kmsg.StringPtr(msg))
		default:
			fail(code, nil)
		}
	})
}

// shareTopicCheck is the share-offset admin APIs' check of a named topic:
// op on it (else TOPIC_AUTHORIZATION_FAILED), then that it exists (else
// UNKNOWN_TOPIC_OR_PARTITION). t is nil when code is not 0.
func (s *Server) shareTopicCheck(r *Request, op kmsg.ACLOperation, name string) (t *topics.Topic, code int16) {
	if !s.authorized(r, op, acls.Topic, name) {
		return nil, kerr.TopicAuthorizationFailed.Code
	}
	if t = s.topics.Get(name); t == nil {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	return t, 0
}

// shareTopicSlot returns the index in *topics of topic id's entry, which
// mk makes (appended) the first time; at maps ids to indexes.
func shareTopicSlot[T any](topics *[]T, at map[[16]byte]int, id [16]byte, mk func([16]byte) T) int {
	if i, ok := at[id]; ok {
		return i
	}
	*topics = append(*topics, mk(id))
	at[id] = len(*topics) - 1
	return at[id]
}

// shareGroupCheckWait is shareGroupCheck waiting for the answer (off the
// event loop only).
func (s *Server) shareGroupCheckWait(group string, needEmpty bool) (int16, string) {
	type answer struct {
		code int16
		msg  string
	}
	ch := make(chan answer, 1)
	s.shareGroupCheck(group, needEmpty, false, func(code int16, msg string) { ch <- answer{code, msg} })
	a := <-ch
	return a.code, a.msg
}
