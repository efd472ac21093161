package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// Producer-state, transactional-id, group and partition metric names;
// Prometheus shows them as regent_producer_states,
// regent_producer_states_limit, regent_transactional_ids,
// regent_transactional_ids_limit, regent_groups, regent_groups_limit,
// regent_partitions and regent_partitions_limit.
const (
	metricProducerStates        = "regent.producer.states"
	metricProducerStatesLimit   = "regent.producer.states.limit"
	metricTransactionalIDs      = "regent.transactional.ids"
	metricTransactionalIDsLimit = "regent.transactional.ids.limit"
	metricGroups                = "regent.groups"
	metricGroupsLimit           = "regent.groups.limit"
	metricPendingMembers        = "regent.group.pending.members"
	metricPendingMembersLimit   = "regent.group.pending.members.limit"
	metricPartitions            = "regent.partitions"
	metricPartitionsLimit       = "regent.partitions.limit"
)

// ProducerStates reports the producers every partition of the node keeps
// idempotence state for, and the bound on them (--max-producer-states).
// Called at each scrape; must be safe concurrently and not block.
type ProducerStates func() (held, limit int64)

// ObserveProducerStates registers the producer-state gauges, read from p
// at each scrape. Call it once. A no-op with telemetry or metrics off.
func (t *Telemetry) ObserveProducerStates(p ProducerStates) error {
	if p == nil {
		return nil
	}
	return t.observeHeldAndLimit(metricProducerStates, metricProducerStatesLimit, "{producer}",
		"Producers whose idempotence state the node's partitions hold (a producer counts once per partition).",
		"The bound on them, --max-producer-states: over it, partitions drop their least recently active producers.",
		p)
}

// TransactionalIDs reports the transactional ids the node's transaction
// coordinator holds (none on a standby node), and the bound on them
// (--max-transactional-ids). Called at each scrape; must be safe
// concurrently and not block.
type TransactionalIDs func() (held, limit int64)

// ObserveTransactionalIDs registers the transactional-id gauges, read
// from f at each scrape. Call it once. A no-op with telemetry or metrics
// off.
func (t *Telemetry) ObserveTransactionalIDs(f TransactionalIDs) error {
	if f == nil {
		return nil
	}
	return t.observeHeldAndLimit(metricTransactionalIDs, metricTransactionalIDsLimit, "{id}",
		"Transactional ids the node's transaction coordinator holds (0 on a node that is not the coordinator).",
		"The bound on them, --max-transactional-ids: over it, the least recently used idle ids expire early.",
		f)
}

// Groups reports the groups the node's group coordinator holds (none on a
// standby node), and the bound on them (--max-groups). Called at each
// scrape; must be safe concurrently and not block.
type Groups func() (held, limit int64)

// ObserveGroups registers the group gauges, read from f at each scrape.
// Call it once. A no-op with telemetry or metrics off.
func (t *Telemetry) ObserveGroups(f Groups) error {
	if f == nil {
		return nil
	}
	return t.observeHeldAndLimit(metricGroups, metricGroupsLimit, "{group}",
		"Consumer and share groups the node's group coordinator holds (0 on a node that is not the coordinator).",
		"The bound on them, --max-groups: over it, a request that would create a group is refused.",
		f)
}

// ObservePendingMembers registers the gauges of pending member ids
// (KIP-394: handed out with MEMBER_ID_REQUIRED, not yet used), read from f
// at each scrape. Call it once. A no-op with telemetry or metrics off.
func (t *Telemetry) ObservePendingMembers(f func() (held, limit int64)) error {
	if f == nil {
		return nil
	}
	return t.observeHeldAndLimit(metricPendingMembers, metricPendingMembersLimit, "{member}",
		"Member ids the node's groups handed out with MEMBER_ID_REQUIRED and that were not used yet.",
		"The bound on them: at it a group gives up its oldest pending id for a new one, or refuses the join.",
		f)
}

// Partitions reports the partitions of all topics, and the bound on them
// (--max-partitions). Called at each scrape; must be safe concurrently and
// not block.
type Partitions func() (held, limit int64)

// ObservePartitions registers the partition gauges, read from f at each
// scrape. Call it once. A no-op with telemetry or metrics off.
func (t *Telemetry) ObservePartitions(f Partitions) error {
	if f == nil {
		return nil
	}
	return t.observeHeldAndLimit(metricPartitions, metricPartitionsLimit, "{partition}",
		"Partitions of all topics on the node.",
		"The bound on them, --max-partitions: a creation over it is refused.",
		f)
}

// observeHeldAndLimit registers a pair of gauges, something held and its
// bound, read from f at each scrape.
func (t *Telemetry) observeHeldAndLimit(heldName, limitName, unit, heldDesc, limitDesc string, f func() (int64, int64)) error {
	if t == nil || t.obs == nil || t.obs.m == nil {
		return nil
	}
	meter := t.obs.m.meter
	held, err := meter.Int64ObservableGauge(heldName, metric.WithUnit(unit), metric.WithDescription(heldDesc))
	if err != nil {
		return err
	}
	limit, err := meter.Int64ObservableGauge(limitName, metric.WithUnit(unit), metric.WithDescription(limitDesc))
	if err != nil {
		return err
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		h, l := f()
		o.ObserveInt64(held, h)
		o.ObserveInt64(limit, l)
		return nil
	}, held, limit)
	if err != nil {
		return fmt.Errorf("register %s gauges: %w", heldName, err)
	}
	t.regs = append(t.regs, reg)
	return nil
}
