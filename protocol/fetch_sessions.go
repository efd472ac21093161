package protocol

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Fetch sessions (KIP-227): a client names its partitions once and then
// sends only changes; the broker answers only partitions whose data or
// offsets changed.

type sessionKey struct {
	topic     string
	partition int32
}

// sessionPartition is what a session remembers of one partition.
type sessionPartition struct {
	key         sessionKey
	topicID     [16]byte
	fetchOffset int64
	maxBytes    int32
	// What the client was last told; -1 until the first answer.
	lastHW, lastLSO, lastLogStart int64
}

// fetchSession is one client's session. mu serializes fetches on it.
type fetchSession struct {
	mu       sync.Mutex
	id       int32
	epoch    int32 // the epoch the next incremental request must carry
	parts    map[sessionKey]*sessionPartition
	order    []sessionKey // insertion order, for stable responses
	lastUsed time.Time
}

type fetchSessions struct {
	mu struct {
		sync.Mutex
		byID map[int32]*fetchSession
	}
	max int
}

func newFetchSessions(max int) *fetchSessions {
	fs := &fetchSessions{max: max}
	fs.mu.byID = map[int32]*fetchSession{}
	return fs
}

// create starts a new session, evicting the least recently used one when
// full. It returns nil when no session can be had (the fetch then runs
// sessionless, which Kafka allows).
func (fs *fetchSessions) create() *fetchSession {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.mu.byID) >= fs.max {
		var oldest *fetchSession
		for _, s := range fs.mu.byID {
			if oldest == nil || s.lastUsed.Before(oldest.lastUsed) {
				oldest = s
			}
		}
		if oldest != nil && time.Since(oldest.lastUsed) < time.Minute {
			return nil
		}
		if oldest != nil {
			delete(fs.mu.byID, oldest.id)
		}
	}
	for {
		id := rand.Int32()
		if id == 0 {
			continue
		}
		if _, taken := fs.mu.byID[id]; taken {
			continue
		}
		s := &fetchSession{id: id, epoch: 1, parts: map[sessionKey]*sessionPartition{}, lastUsed: time.Now()}
		fs.mu.byID[id] = s
		return s
	}
}

// get finds a session for an incremental fetch and checks its epoch.
func (fs *fetchSessions) get(id, epoch int32) (*fetchSession, *kerr.Error) {
	fs.mu.Lock()
	s := fs.mu.byID[id]
	fs.mu.Unlock()
	if s == nil {
		return nil, kerr.FetchSessionIDNotFound
	}
	return s, nil
}

func (fs *fetchSessions) remove(id int32) {
	fs.mu.Lock()
	delete(fs.mu.byID, id)
	fs.mu.Unlock()
}

func (s *fetchSession) upsert(p sessionPartition) {
	if cur, ok := s.parts[p.key]; ok {
		cur.fetchOffset, cur.maxBytes, cur.topicID = p.fetchOffset, p.maxBytes, p.topicID
		return
	}
	p.lastHW, p.lastLSO, p.lastLogStart = -1, -1, -1
	cp := p
	s.parts[p.key] = &cp
	s.order = append(s.order, p.key)
}

func (s *fetchSession) forget(k sessionKey) {
	if _, ok := s.parts[k]; !ok {
		return
	}
	delete(s.parts, k)
	for i, o := range s.order {
		if o == k {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}
