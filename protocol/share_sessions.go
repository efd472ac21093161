package protocol

// Share sessions (KIP-932): the broker's memory of which partitions a share
// group member fetches from, keyed by group and member id, as Kafka's
// ShareSessionCache keeps them. A ShareFetch with epoch 0 opens a session
// (replacing the member's earlier one) with the partitions it names; later
// ShareFetch and ShareAcknowledge requests carry the epoch the session
// expects next, which moves on by one each time (wrapping to 1); -1 closes
// it. Closing a session, or replacing it, releases the member's acquired
// records on each of its partitions, so other members get them without
// waiting for the acquisition locks to expire. The cache holds at most
// group.share.max.share.sessions sessions (Kafka's default, 2000); one more
// is refused with SHARE_SESSION_LIMIT_REACHED.
//
// As Kafka's, a session also ends when the connection that opened it
// closes (Server.ConnClosed): a client that is gone holds no records until
// their locks expire.
//
// Sessions are this node's own (as on each Kafka broker): they are not
// replicated, and a restart or a leader change makes clients open new ones
// (SHARE_SESSION_NOT_FOUND tells them to).

import (
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// defaultMaxShareSessions is Kafka's group.share.max.share.sessions default.
const defaultMaxShareSessions = 2000

// shareSessionKey names a session: one per member of a share group, and
// per node the member's requests were forwarded from (origin; 0: this
// node's own clients), as the client keeps one per broker.
type shareSessionKey struct {
	group, member string
	origin        int32
}

// shareKey is the session key of r's member.
func shareKey(r *Request, group, member string) shareSessionKey {
	k := shareSessionKey{group: group, member: member}
	if r.Conn != nil {
		k.origin = r.Conn.origin
	}
	return k
}

// sharePart is one partition of a share session.
type sharePart struct {
	topicID   [16]byte
	topic     string // "" when the id names no topic
	partition int32
}

// shareSession is one member's session. Its fields are owned by the
// shareSessions lock; handlers get copies.
type shareSession struct {
	key shareSessionKey
	// epoch is the epoch the next request must carry (1 after opening).
	epoch int32
	// parts are the session's partitions in the order they were added.
	parts []sharePart
	// conn is the connection that opened the session (0: unknown).
	conn uint64
}

// shareSessions is the bounded session cache. Safe from any goroutine.
type shareSessions struct {
	max int
	mu  struct {
		sync.Mutex
		m map[shareSessionKey]*shareSession
		// byConn indexes the sessions by the connection that opened
		// them (conn 0 is not indexed). Invariant: k is in
		// byConn[c] exactly when m[k] exists with conn c != 0.
		byConn map[uint64]map[shareSessionKey]struct{}
	}
}

func newShareSessions(max int) *shareSessions {
	if max <= 0 {
		max = defaultMaxShareSessions
	}
	c := &shareSessions{max: max}
	c.mu.m = map[shareSessionKey]*shareSession{}
	c.mu.byConn = map[uint64]map[shareSessionKey]struct{}{}
	return c
}

// nextShareEpoch is the epoch after e: e+1, wrapping to 1 (0 opens and -1
// closes a session, so neither is ever expected).
func nextShareEpoch(e int32) int32 {
	if e >= 1<<31-1 || e < 0 {
		return 1
	}
	return e + 1
}

// open starts k's session with parts on connection conn (0: unknown),
// replacing k's earlier session, whose partitions are returned as released
// (the caller releases the member's records on them).
// SHARE_SESSION_LIMIT_REACHED when the cache is full.
func (c *shareSessions) open(k shareSessionKey, parts []sharePart, conn uint64) (released []sharePart, err *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.mu.m[k]; ok {
		released = old.parts
		c.dropLocked(old)
	}
	if len(c.mu.m) >= c.max {
		return released, kerr.ShareSessionLimitReached
	}
	s := &shareSession{key: k, epoch: 1, conn: conn}
	for _, p := range parts {
		s.add(p)
	}
	c.mu.m[k] = s
	if conn != 0 {
		ks := c.mu.byConn[conn]
		if ks == nil {
			ks = map[shareSessionKey]struct{}{}
			c.mu.byConn[conn] = ks
		}
		ks[k] = struct{}{}
	}
	return released, nil
}

// dropLocked removes s from the cache and its connection's index.
func (c *shareSessions) dropLocked(s *shareSession) {
	delete(c.mu.m, s.key)
	if ks := c.mu.byConn[s.conn]; ks != nil {
		delete(ks, s.key)
		if len(ks) == 0 {
			delete(c.mu.byConn, s.conn)
		}
	}
}

// next checks epoch against k's session and moves it on: add joins
// partitions, forget drops them. It returns the session's partitions after
// the change, and the partitions forgotten (the caller releases the
// member's records on them). SHARE_SESSION_NOT_FOUND without a session,
// INVALID_SHARE_SESSION_EPOCH when epoch is not the one expected (the
// session is left as it was).
func (c *shareSessions) next(k shareSessionKey, epoch int32, add []sharePart, forget []sharePart) (parts, forgotten []sharePart, err *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.mu.m[k]
	if !ok {
		return nil, nil, kerr.ShareSessionNotFound
	}
	if epoch != s.epoch {
		return nil, nil, kerr.InvalidShareSessionEpoch
	}
	for _, p := range add {
		s.add(p)
	}
	for _, p := range forget {
		if q, ok := s.remove(p); ok {
			forgotten = append(forgotten, q)
		}
	}
	s.epoch = nextShareEpoch(s.epoch)
	return slices.Clone(s.parts), forgotten, nil
}

// close ends k's session and returns its partitions (for the caller to
// release the member's records on). SHARE_SESSION_NOT_FOUND without one.
func (c *shareSessions) close(k shareSessionKey) ([]sharePart, *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.mu.m[k]
	if !ok {
		return nil, kerr.ShareSessionNotFound
	}
	c.dropLocked(s)
	return s.parts, nil
}

// check reports whether k has a session whose next epoch is epoch (-1:
// any),
// without moving it (the ShareFetch with epoch -1 checks this before it
// applies acknowledgements).
func (c *shareSessions) check(k shareSessionKey, epoch int32) *kerr.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.mu.m[k]
	switch {
	case !ok:
		return kerr.ShareSessionNotFound
	case epoch != -1 && epoch != s.epoch:
		return kerr.InvalidShareSessionEpoch
	}
	return nil
}

// openOnConn reports whether the member has a session opened on a known
// connection (whose close ends it).
func (c *shareSessions) openOnConn(group, member string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.mu.m {
		if k.group == group && k.member == member && s.conn != 0 {
			return true
		}
	}
	return false
}

// closeMember ends the sessions of a member that left its group (or was
// fenced), one per origin, returning their partitions; none when it had
// no session.
func (c *shareSessions) closeMember(group, member string) []sharePart {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []sharePart
	for k, s := range c.mu.m {
		if k.group == group && k.member == member {
			parts = append(parts, s.parts...)
			c.dropLocked(s)
		}
	}
	return parts
}

// closeGroup ends every session of group (the group was deleted) and
// returns them.
func (c *shareSessions) closeGroup(group string) map[shareSessionKey][]sharePart {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[shareSessionKey][]sharePart{}
	for k, s := range c.mu.m {
		if k.group == group {
			out[k] = s.parts
			c.dropLocked(s)
		}
	}
	return out
}

// closeConn ends the sessions connection conn opened (it closed) and
// returns them.
func (c *shareSessions) closeConn(conn uint64) map[shareSessionKey][]sharePart {
	c.mu.Lock()
	defer c.mu.Unlock()
	ks := c.mu.byConn[conn]
	if conn == 0 || len(ks) == 0 {
		return nil
	}
	out := make(map[shareSessionKey][]sharePart, len(ks))
	for k := range ks {
		s := c.mu.m[k]
		out[k] = s.parts
		c.dropLocked(s)
	}
	return out
}

// len is the number of open sessions.
func (c *shareSessions) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.m)
}

// add joins p to the session unless it is there already.
func (s *shareSession) add(p sharePart) {
	if !slices.ContainsFunc(s.parts, func(q sharePart) bool { return q.topicID == p.topicID && q.partition == p.partition }) {
		s.parts = append(s.parts, p)
	}
}

// remove drops the session's partition p names (by topic id and index)
// and returns it; false when it was not there. A forgotten partition is
// named by id only: the returned one has the topic's name.
func (s *shareSession) remove(p sharePart) (sharePart, bool) {
	i := slices.IndexFunc(s.parts, func(q sharePart) bool { return q.topicID == p.topicID && q.partition == p.partition })
	if i < 0 {
		return sharePart{}, false
	}
	q := s.parts[i]
	s.parts = slices.Delete(s.parts, i, i+1)
	return q, true
}
