package protocol

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/regent-broker/regent/actors/topics"
)

// producerIDBlock is how many ids are reserved on disk at a time; a crash
// skips at most this many, never reuses one.
const producerIDBlock = 1000

// ProducerIDs hands out producer ids that are never reused, across restarts.
type ProducerIDs struct {
	path string
	mu   struct {
		sync.Mutex
		next, reservedEnd int64
	}
}

// OpenProducerIDs loads the reservation from dir.
func OpenProducerIDs(dir string) (*ProducerIDs, error) {
	p := &ProducerIDs{path: filepath.Join(dir, "meta", "producer-ids")}
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
		p.mu.next, p.mu.reservedEnd = n, n
	}
	return p, nil
}

// Next returns a fresh producer id.
func (p *ProducerIDs) Next() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.next >= p.mu.reservedEnd {
		end := p.mu.next + producerIDBlock
		if err := topics.WriteFileAtomic(p.path, []byte(strconv.FormatInt(end, 10))); err != nil {
			return -1, fmt.Errorf("reserve producer ids: %w", err)
		}
		p.mu.reservedEnd = end
	}
	id := p.mu.next
	p.mu.next++
	return id, nil
}
