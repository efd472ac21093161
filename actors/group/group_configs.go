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

// streamsSessionTimeout is the KIP-1071 session timeout of the group's
// members: the group's streams.session.timeout.ms when set, else the
// broker's group.streams.session.timeout.ms.
func (g *Group) streamsSessionTimeout() time.Duration {
	if g.cfg.GroupStreamsConfigs != nil {
		if s, _, _ := g.cfg.GroupStreamsConfigs(g.id); s > 0 {
			return s
		}
	}
	return g.cfg.StreamsSessionTimeout
}

// streamsHeartbeatInterval is the group's streams.heartbeat.interval.ms
// when set, else the broker's group.streams.heartbeat.interval.ms.
func (g *Group) streamsHeartbeatInterval() time.Duration {
	if g.cfg.GroupStreamsConfigs != nil {
		if _, h, _ := g.cfg.GroupStreamsConfigs(g.id); h > 0 {
			return h
		}
	}
	return g.cfg.StreamsHeartbeatInterval
}

// streamsStandbyReplicas is the group's streams.num.standby.replicas when
// set, else the broker's group.streams.num.standby.replicas. A change
// moves the group epoch at the next heartbeat, as in Kafka.
func (g *Group) streamsStandbyReplicas() int {
	if g.cfg.GroupStreamsConfigs != nil {
		if _, _, n := g.cfg.GroupStreamsConfigs(g.id); n >= 0 {
			return n
		}
	}
	return g.cfg.StreamsStandbyReplicas
}
