package logconfig

import (
	"sort"
	"strconv"
)

// Broker holds broker-level config values (static or dynamic) keyed by
// their broker names, e.g. "log.retention.hours" -> "1". Values not listed
// fall back to Kafka's defaults. Static are the values given at start
// (--broker-config): an override that is not one of them was set at
// runtime (AlterConfigs), which DescribeConfigs reports as dynamic, and a
// runtime value deleted falls back to the static one.
type Broker struct {
	Overrides map[string]string
	Static    map[string]string
}

// Dynamic returns the overrides set at runtime: those that are not the
// value given at start.
func (b Broker) Dynamic() map[string]string {
	out := map[string]string{}
	for k, v := range b.Overrides {
		if sv, ok := b.Static[k]; !ok || sv != v {
			out[k] = v
		}
	}
	return out
}

// source is the source of name's override raw: static when it is the
// value given at start, else dynamic (per broker when perBroker, as a
// broker's own resource describes it, else the cluster default's).
func (b Broker) source(name, raw string, perBroker bool) Source {
	if v, ok := b.Static[name]; ok && v == raw {
		return SourceStaticBroker
	}
	if perBroker {
		return SourceDynamicBroker
	}
	return SourceDynamicDefaultBroker
}

func brokerDef(name string, t Type, dflt string, hasDefault bool, v validator, dynamic, enforced bool, doc string, group ...string) Def {
	if !hasDefault {
		dflt = ""
	}
	if len(group) == 0 {
		group = []string{name}
	}
	if v == nil {
		v = typeOnly(t)
	}
	return Def{
		Name:       name,
		Type:       t,
		Default:    dflt,
		HasDefault: hasDefault,
		Doc:        doc,
		Enforced:   enforced,
		ReadOnly:   !dynamic,
		validate:   func(raw string) error { return v(name, raw) },
		group:      group,
	}
}

// typeOnly checks only that the value parses as t (Kafka keys defined
// without a validator).
func typeOnly(t Type) validator {
	switch t {
	case TypeBoolean:
		return boolV()
	case TypeInt, TypeShort, TypeLong:
		return integralV(t, nil, nil)
	case TypeDouble:
		return doubleV(nil, nil)
	}
	return anyString()
}

// The delegation token keys (actors/users/tokens.go).
const (
	DelegationTokenSecretKey             = "delegation.token.secret.key"
	DelegationTokenMaxLifetimeMs         = "delegation.token.max.lifetime.ms"
	DelegationTokenExpiryTimeMs          = "delegation.token.expiry.time.ms"
	DelegationTokenExpiryCheckIntervalMs = "delegation.token.expiry.check.interval.ms"
)

// secret marks d sensitive: DescribeConfigs never shows its value.
func secret(d Def) Def {
	d.Sensitive = true
	return d
}

// TransactionMaxTimeoutMsDefault is transaction.max.timeout.ms when not
// configured: what the transaction coordinator enforces (actors/txn) and
// what DescribeConfigs reports, one value.
const TransactionMaxTimeoutMsDefault = 3600000

// ReplicaLagTimeMaxMsKey is Kafka's replica.lag.time.max.ms, and
// DefaultReplicaLagTimeMaxMs its default (cluster.DefaultReplicaLagMax).
const (
	ReplicaLagTimeMaxMsKey     = "replica.lag.time.max.ms"
	DefaultReplicaLagTimeMaxMs = 30000
)

// Kafka's automatic preferred-leader election keys, which move partition
// raft groups' leaders.
const (
	AutoLeaderRebalanceEnableKey           = "auto.leader.rebalance.enable"
	LeaderImbalanceCheckIntervalSecondsKey = "leader.imbalance.check.interval.seconds"
)

// DefaultTransactionalIDExpirationMs is Kafka's
// transactional.id.expiration.ms: seven days.
const DefaultTransactionalIDExpirationMs = 604_800_000

// noGSSAPI opens the documentation of Kerberos keys.
const noGSSAPI = notEnforced + ": Regent has no GSSAPI (Kerberos) SASL mechanism (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 only)."

const (
	dyn = true  // alterable at runtime (Kafka's per-broker or cluster-wide update mode)
	ro  = false // read-only: needs a restart in Kafka
	enf = true
	off = false
)

var (
	rollGroup      = []string{"log.roll.ms", "log.roll.hours"}
	jitterGroup    = []string{"log.roll.jitter.ms", "log.roll.jitter.hours"}
	flushMsGroup   = []string{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"}
	retentionGroup = []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"}
)

// brokerDefs are the broker keys Regent reports in DescribeConfigs(BROKER).
// Dynamic ones are exactly those Kafka lets AlterConfigs change at runtime:
// the first-priority broker synonym of every topic config (log.retention.ms
// but not log.retention.hours, log.roll.ms but not log.roll.hours, ...).
var brokerDefs = func() []Def {
	defs := []Def{
		// Defaults inherited by topics.
		brokerDef("log.segment.bytes", TypeInt, strconv.Itoa(DefaultSegmentBytes), true, integralV(TypeInt, bnd(MinSegmentBytes), nil), dyn, enf,
			"Default segment.bytes for topics."),
		brokerDef("log.roll.ms", TypeLong, "", false, nil, dyn, enf,
			"Default segment.ms for topics; when unset, log.roll.hours is used.", rollGroup...),
		brokerDef("log.roll.hours", TypeInt, "168", true, integralV(TypeInt, bnd(1), nil), ro, enf,
			"Default segment.ms for topics, in hours; log.roll.ms takes precedence.", rollGroup...),
		brokerDef("log.roll.jitter.ms", TypeLong, "", false, nil, dyn, off,
			notEnforced+". Default segment.jitter.ms; when unset, log.roll.jitter.hours is used.", jitterGroup...),
		brokerDef("log.roll.jitter.hours", TypeInt, "0", true, integralV(TypeInt, bnd(0), nil), ro, off,
			notEnforced+". Default segment.jitter.ms, in hours.", jitterGroup...),
		brokerDef("log.index.size.max.bytes", TypeInt, "10485760", true, integralV(TypeInt, bnd(4), nil), dyn, off,
			notEnforced+". Default segment.index.bytes."),
		brokerDef("log.flush.interval.messages", TypeLong, maxLong, true, integralV(TypeLong, bnd(1), nil), dyn, off,
			notEnforced+". Default flush.messages."),
		brokerDef("log.flush.interval.ms", TypeLong, "", false, nil, dyn, off,
			notEnforced+". Default flush.ms; when unset, log.flush.scheduler.interval.ms is used.", flushMsGroup...),
		brokerDef("log.flush.scheduler.interval.ms", TypeLong, maxLong, true, nil, ro, off,
			notEnforced+". Fallback for log.flush.interval.ms.", flushMsGroup...),
		brokerDef("log.retention.bytes", TypeLong, "-1", true, nil, dyn, enf,
			"Default retention.bytes for topics; -1 means no limit."),
		brokerDef("log.retention.ms", TypeLong, "", false, nil, dyn, enf,
			"Default retention.ms for topics; takes precedence over log.retention.minutes and log.retention.hours. Negative means no limit.", retentionGroup...),
		brokerDef("log.retention.minutes", TypeInt, "", false, nil, ro, enf,
			"Default retention.ms for topics, in minutes; used when log.retention.ms is unset.", retentionGroup...),
		brokerDef("log.retention.hours", TypeInt, "168", true, nil, ro, enf,
			"Default retention.ms for topics, in hours; used when log.retention.ms and log.retention.minutes are unset.", retentionGroup...),
		brokerDef("message.max.bytes", TypeInt, strconv.Itoa(DefaultMaxMessageBytes), true, integralV(TypeInt, bnd(0), nil), dyn, enf,
			"Default max.message.bytes for topics: largest record batch accepted, after compression."),
		brokerDef("log.index.interval.bytes", TypeInt, "4096", true, integralV(TypeInt, bnd(0), nil), dyn, enf,
			"Default index.interval.bytes for topics."),
		brokerDef("log.cleaner.delete.retention.ms", TypeLong, "86400000", true, integralV(TypeLong, bnd(0), nil), dyn, enf,
			"Default delete.retention.ms for topics."),
		brokerDef("log.cleaner.min.compaction.lag.ms", TypeLong, "0", true, integralV(TypeLong, bnd(0), nil), dyn, enf,
			"Default min.compaction.lag.ms for topics."),
		brokerDef("log.cleaner.max.compaction.lag.ms", TypeLong, maxLong, true, integralV(TypeLong, bnd(1), nil), dyn, enf,
			"Default max.compaction.lag.ms for topics."),
		brokerDef("log.segment.delete.delay.ms", TypeLong, "60000", true, integralV(TypeLong, bnd(0), nil), dyn, off,
			notEnforced+". Default file.delete.delay.ms."),
		brokerDef("log.cleaner.min.cleanable.ratio", TypeDouble, "0.5", true, doubleV(bnd(0), bnd(1)), dyn, enf,
			"Default min.cleanable.dirty.ratio for topics."),
		brokerDef("log.cleanup.policy", TypeList, "delete", true, listIn("compact", "delete"), dyn, enf,
			"Default cleanup.policy for topics."),
		brokerDef("unclean.leader.election.enable", TypeBoolean, "false", true, nil, dyn, off,
			notEnforced+". Default unclean.leader.election.enable."),
		brokerDef("min.insync.replicas", TypeInt, "1", true, integralV(TypeInt, bnd(1), nil), dyn, enf,
			"Default min.insync.replicas for topics."),
		brokerDef("compression.type", TypeString, "producer", true,
			stringIn("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), dyn, off,
			notEnforced+": batches are kept as produced. Default compression.type for topics."),
		brokerDef("compression.gzip.level", TypeInt, "-1", true, gzipLevelV(), dyn, off,
			notEnforced+". Default compression.gzip.level."),
		brokerDef("compression.lz4.level", TypeInt, "9", true, integralV(TypeInt, bnd(1), bnd(17)), dyn, off,
			notEnforced+". Default compression.lz4.level."),
		brokerDef("compression.zstd.level", TypeInt, "3", true, integralV(TypeInt, bnd(-131072), bnd(22)), dyn, off,
			notEnforced+". Default compression.zstd.level."),
		brokerDef("log.preallocate", TypeBoolean, "false", true, nil, dyn, off,
			notEnforced+". Default preallocate."),
		brokerDef("log.message.timestamp.type", TypeString, "CreateTime", true, stringIn("CreateTime", "LogAppendTime"), dyn, enf,
			"Default message.timestamp.type for topics."),
		brokerDef("log.message.timestamp.before.max.ms", TypeLong, maxLong, true, integralV(TypeLong, bnd(0), nil), dyn, enf,
			"Default message.timestamp.before.max.ms for topics."),
		brokerDef("log.message.timestamp.after.max.ms", TypeLong, strconv.Itoa(MessageTimestampAfterMaxMsDefault), true, integralV(TypeLong, bnd(0), nil), dyn, enf,
			"Default message.timestamp.after.max.ms for topics."),
		brokerDef("log.local.retention.ms", TypeLong, "-2", true, integralV(TypeLong, bnd(-2), nil), dyn, off,
			notEnforced+": tiered storage is not supported. Default local.retention.ms."),
		brokerDef("log.local.retention.bytes", TypeLong, "-2", true, integralV(TypeLong, bnd(-2), nil), dyn, off,
			notEnforced+": tiered storage is not supported. Default local.retention.bytes."),

		// Cluster behaviour.
		brokerDef("broker.id", TypeInt, "-1", true, nil, ro, enf,
			"This broker's id; reported as node.id when only node.id is set."),
		brokerDef("node.id", TypeInt, "-1", true, nil, ro, enf,
			"This node's id."),
		brokerDef("num.partitions", TypeInt, "1", true, integralV(TypeInt, bnd(1), nil), ro, enf,
			"Partitions of a topic created without a partition count, including auto-created topics."),
		brokerDef("default.replication.factor", TypeInt, "1", true, nil, ro, enf,
			"Replication factor of a topic created without one, including auto-created topics."),
		brokerDef("auto.create.topics.enable", TypeBoolean, "true", true, nil, ro, enf,
			"Whether Metadata and Produce requests for an unknown topic create it."),
		brokerDef("allow.everyone.if.no.acl.found", TypeBoolean, "false", true, nil, ro, enf,
			"With --authorizer acl: whether a resource no ACL applies to is open to every principal."),
		brokerDef("offsets.topic.replication.factor", TypeShort, "3", true, integralV(TypeShort, bnd(1), nil), ro, off,
			notEnforced+": every voter holds the group coordinator's state, replicated through the raft log, and Metadata lists the voters as __consumer_offsets' replicas. Replication factor of __consumer_offsets."),
		brokerDef("offsets.topic.num.partitions", TypeInt, "50", true, integralV(TypeInt, bnd(1), nil), ro, enf,
			"Partitions of __consumer_offsets, as Metadata and DescribeTopicPartitions show it."),
		brokerDef("transaction.state.log.replication.factor", TypeShort, "3", true, integralV(TypeShort, bnd(1), nil), ro, off,
			notEnforced+": every voter holds the transaction coordinator's state, replicated through the raft log, and Metadata lists the voters as __transaction_state's replicas. Replication factor of __transaction_state."),
		brokerDef("transaction.state.log.num.partitions", TypeInt, "50", true, integralV(TypeInt, bnd(1), nil), ro, enf,
			"Partitions of __transaction_state, as Metadata and DescribeTopicPartitions show it."),
		brokerDef("transaction.state.log.min.isr", TypeInt, "2", true, integralV(TypeInt, bnd(1), nil), ro, off,
			notEnforced+": the transaction coordinator's state is committed when a raft majority of the voters holds it. min.insync.replicas of __transaction_state."),
		brokerDef("transaction.max.timeout.ms", TypeInt, strconv.Itoa(TransactionMaxTimeoutMsDefault), true, integralV(TypeInt, bnd(1), nil), ro, enf,
			"Largest transaction timeout a producer may ask for (else INVALID_TRANSACTION_TIMEOUT); set with --txn-max-timeout-ms or this key. Regent's default is an hour, Kafka's 15 minutes."),
		brokerDef("producer.id.expiration.ms", TypeInt, strconv.Itoa(DefaultProducerIDExpirationMs), true, integralV(TypeInt, bnd(1), nil), dyn, enf,
			"How long a partition keeps an idle producer's state (idempotence sequences) after its last batch's timestamp; never while it has a transaction open there. The leader's maintenance pass drops it, to the second, through the log."),
		brokerDef("transactional.id.expiration.ms", TypeInt, strconv.Itoa(DefaultTransactionalIDExpirationMs), true, integralV(TypeInt, bnd(1), nil), ro, enf,
			"How long the transaction coordinator keeps a transactional id with no transaction in progress after its last change; --broker-config sets it."),
		brokerDef(ReplicaLagTimeMaxMsKey, TypeLong, strconv.Itoa(DefaultReplicaLagTimeMaxMs), true, integralV(TypeLong, bnd(1), nil), ro, enf,
			"How long the raft leader keeps a voter in the ISR without seeing it caught up with the leader's log (every voter counts as caught up when a leader begins); --broker-config sets it. A voter whose heartbeats fail leaves the ISR at once."),
		brokerDef(AutoLeaderRebalanceEnableKey, TypeBoolean, "true", true, nil, ro, enf,
			"With partition raft groups (--raft-groups), whether each group's leader hands its leadership to the group's preferred node (the first replica Metadata lists for its partitions) when that node is in sync, checked 5 s after a node takes a group's lead and every leader.imbalance.check.interval.seconds; --broker-config sets it."),
		brokerDef(LeaderImbalanceCheckIntervalSecondsKey, TypeLong, "300", true, integralV(TypeLong, bnd(1), nil), ro, enf,
			"How often a partition raft group's leader checks that it is the group's preferred node (auto.leader.rebalance.enable); --broker-config sets it."),
		brokerDef("group.initial.rebalance.delay.ms", TypeInt, "3000", true, nil, ro, enf,
			"How long a new classic consumer group waits for more members before its first rebalance."),
		brokerDef("group.min.session.timeout.ms", TypeInt, "6000", true, nil, ro, enf,
			"Smallest session timeout a classic group member may ask for."),
		brokerDef("group.max.session.timeout.ms", TypeInt, "1800000", true, nil, ro, enf,
			"Largest session timeout a classic group member may ask for."),
		// Connection limits, applied to the connections accepted after a change.
		brokerDef(MaxConnectionsKey, TypeInt, strconv.Itoa(DefaultMaxConnections), true, integralV(TypeInt, bnd(0), nil), dyn, enf,
			"Connections each listener holds at once (--max-connections sets the value given at start); a connection over it is closed as it is accepted. Regent counts per listener, Kafka across listeners. Lowering it closes no open connection."),
		brokerDef(MaxConnectionsPerIPKey, TypeInt, strconv.Itoa(DefaultMaxConnectionsPerIP), true, integralV(TypeInt, bnd(0), nil), dyn, enf,
			"Connections one client address holds at once, across listeners (--max-connections-per-ip sets the value given at start); 0 admits only the addresses max.connections.per.ip.overrides names. Lowering it closes no open connection."),
		brokerDef(MaxConnectionsPerIPOverKey, TypeString, "", true, connectionOverridesV(), dyn, enf,
			"Bounds for named client addresses over max.connections.per.ip, as ADDR:COUNT,... (--max-connections-per-ip-overrides sets the value given at start). Addresses only: Regent takes no host names here."),
		// Throttles kafka-reassign-partitions sets and clears.
		brokerDef("leader.replication.throttled.rate", TypeLong, maxLong, true, integralV(TypeLong, bnd(0), nil), dyn, off,
			notEnforced+": replication quotas are not implemented (raft replication is not throttled). Bytes per second a leader sends to the replicas named by leader.replication.throttled.replicas."),
		brokerDef("follower.replication.throttled.rate", TypeLong, maxLong, true, integralV(TypeLong, bnd(0), nil), dyn, off,
			notEnforced+": replication quotas are not implemented (raft replication is not throttled). Bytes per second a follower fetches for the replicas named by follower.replication.throttled.replicas."),
		brokerDef("replica.alter.log.dirs.io.max.bytes.per.second", TypeLong, maxLong, true, integralV(TypeLong, bnd(0), nil), dyn, off,
			notEnforced+": a node has one log directory, so replicas never move between directories. Bytes per second such a move may read and write."),
		// Kerberos (GSSAPI) login settings, which Kafka lets AlterConfigs
		// change per broker; admin clients and tools set them.
		brokerDef("sasl.kerberos.service.name", TypeString, "", false, nil, dyn, off,
			noGSSAPI+" Kerberos principal name that Kafka runs as."),
		brokerDef("sasl.kerberos.kinit.cmd", TypeString, "/usr/bin/kinit", true, nil, dyn, off,
			noGSSAPI+" Kerberos kinit command path."),
		brokerDef("sasl.kerberos.ticket.renew.window.factor", TypeDouble, "0.8", true, nil, dyn, off,
			noGSSAPI+" Share of a ticket's lifetime after which the login thread renews it."),
		brokerDef("sasl.kerberos.ticket.renew.jitter", TypeDouble, "0.05", true, nil, dyn, off,
			noGSSAPI+" Random jitter added to the renewal time."),
		brokerDef("sasl.kerberos.min.time.before.relogin", TypeLong, "60000", true, nil, dyn, off,
			noGSSAPI+" Login thread sleep time between refresh attempts."),
		brokerDef("sasl.kerberos.principal.to.local.rules", TypeList, "DEFAULT", true, nil, dyn, off,
			noGSSAPI+" Rules mapping Kerberos principal names to short names."),
		secret(brokerDef(DelegationTokenSecretKey, TypePassword, "", false, nil, ro, enf,
			"Secret key that delegation tokens' HMACs are made with; unset, delegation tokens are off (DELEGATION_TOKEN_AUTH_DISABLED). Give every node of a cluster the same key.")),
		brokerDef(DelegationTokenMaxLifetimeMs, TypeLong, "604800000", true, integralV(TypeLong, bnd(1), nil), ro, enf,
			"Longest a delegation token lives, renewals included."),
		brokerDef(DelegationTokenExpiryTimeMs, TypeLong, "86400000", true, integralV(TypeLong, bnd(1), nil), ro, enf,
			"How long a delegation token lives before it must be renewed, unless the renewal asks for another period."),
		brokerDef(DelegationTokenExpiryCheckIntervalMs, TypeLong, "3600000", true, integralV(TypeLong, bnd(1), nil), ro, enf,
			"How often the cluster leader removes expired delegation tokens (an expired token never authenticates, removed or not)."),
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
	return defs
}()

var brokerIndex = func() map[string]int {
	m := make(map[string]int, len(brokerDefs))
	for i, d := range brokerDefs {
		m[d.Name] = i
	}
	return m
}()

// Defs returns the broker-level defs Regent reports, sorted by name. The
// slice is a copy; it does not depend on b's overrides.
func (b Broker) Defs() []Def {
	out := make([]Def, len(brokerDefs))
	copy(out, brokerDefs)
	return out
}

// LookupBroker returns the def of a broker-level key.
func LookupBroker(name string) (Def, bool) {
	i, ok := brokerIndex[name]
	if !ok {
		return Def{}, false
	}
	return brokerDefs[i], true
}

func (b Broker) get(name string) (string, bool) {
	v, ok := b.Overrides[name]
	return v, ok
}
