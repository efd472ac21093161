package group

// KIP-848 consumer groups: placeholder until the consumer protocol lands.

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type cgMember struct{}

type consumerGroup struct {
	epoch   int32
	members map[string]*cgMember
}

func (c *consumerGroup) nextDeadline() time.Time                                  { return time.Time{} }
func (c *consumerGroup) advance(g *Group, now time.Time)                          {}
func (c *consumerGroup) subscribes(topic string) bool                             { return false }
func (c *consumerGroup) state() State                                             { return Empty }
func (c *consumerGroup) validateFetch(q FetchQuery) int16                         { return 0 }
func (c *consumerGroup) validateCommit(req *kmsg.OffsetCommitRequest) *kerr.Error { return nil }

type cgSnapshot struct{}

func (s *cgSnapshot) appendTo(dst []byte) []byte { return dst }

func readCGSnapshot(b []byte) (*cgSnapshot, error) { return nil, errors.New("not supported") }

func (g *Group) restoreConsumerGroup(s *cgSnapshot, now time.Time) {}
