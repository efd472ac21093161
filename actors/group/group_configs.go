package group

import "time"

// consumerSessionTimeout is the KIP-848 session timeout of the group's
// members: the group's consumer.session.timeout.ms config when set, else
// the broker's group.consumer.session.timeout.ms. Read at each heartbeat,
// so a change applies from a member's next heartbeat, as in Kafka.
func (g *Group) consumerSessionTimeout() time.Duration {
	if g.cfg.GroupConsumerTimeouts != nil {
		if s, _ := g.cfg.GroupConsumerTimeouts(g.id); s > 0 {
			return s
		}
	}
	return g.cfg.ConsumerSessionTimeout
}

// consumerHeartbeatInterval is the interval the group's members are told
// to heartbeat at: the group's consumer.heartbeat.interval.ms config when
// set, else the broker's group.consumer.heartbeat.interval.ms.
func (g *Group) consumerHeartbeatInterval() time.Duration {
	if g.cfg.GroupConsumerTimeouts != nil {
		if _, h := g.cfg.GroupConsumerTimeouts(g.id); h > 0 {
			return h
		}
	}
	return g.cfg.ConsumerHeartbeatInterval
}
