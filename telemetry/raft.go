package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/regent-broker/regent/cluster"
)

const spanRaftApply = "raft.apply"

var (
	attrNode       = attribute.Key("regent.node.id")
	attrRaftKey    = attribute.Key("regent.raft.key")
	attrRaftCmd    = attribute.Key("regent.raft.command")
	attrReplicator = attribute.Key("regent.replicator")
)

// SetReplicator names the replicator storage spans report ("local" or
// "raft"); call it before requests are served.
func (t *Telemetry) SetReplicator(name string) {
	if t != nil && t.obs != nil {
		t.obs.replicator = name
	}
}

// RaftObserver returns the tracer of raft applies, or nil with tracing
// off. Each node's apply of a traced command becomes a span whose parent
// is the proposing request's storage span, so one request's trace spans
// every node that applied it.
func (t *Telemetry) RaftObserver() cluster.ApplyObserver {
	if t == nil || t.obs == nil || t.obs.tracer == nil {
		return nil
	}
	return &raftObserver{o: t.obs}
}

type raftObserver struct{ o *observer }

func (r *raftObserver) StartApply(traceparent, key, kind string, node int32) func() {
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return func() {}
	}
	_, span := r.o.tracer.Start(ctx, spanRaftApply, trace.WithAttributes(
		attrNode.Int(int(node)), attrRaftKey.String(key), attrRaftCmd.String(kind),
	))
	return func() { span.End() }
}

// traceParent renders a span's context as a W3C traceparent ("" when it
// is not sampled: followers would only drop it).
func traceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// RaftState is what the raft gauges read at each scrape.
type RaftState func() cluster.Status

// ObserveRaft registers the raft gauges: role, term, indexes, leader and
// voters. A no-op with metrics off.
func (t *Telemetry) ObserveRaft(state RaftState) error {
	if t == nil || t.obs == nil || t.obs.m == nil {
		return nil
	}
	m := t.obs.m.meter
	role, err := m.Int64ObservableGauge("regent.raft.state", metric.WithDescription("Raft role of this node: 0 follower, 1 candidate, 2 leader, 3 shutdown."))
	if err != nil {
		return err
	}
	term, err := m.Int64ObservableGauge("regent.raft.term", metric.WithDescription("Current raft term."))
	if err != nil {
		return err
	}
	commit, err := m.Int64ObservableGauge("regent.raft.commit_index", metric.WithDescription("Index of the last raft entry known committed."))
	if err != nil {
		return err
	}
	applied, err := m.Int64ObservableGauge("regent.raft.applied_index", metric.WithDescription("Index of the last raft entry applied on this node."))
	if err != nil {
		return err
	}
	last, err := m.Int64ObservableGauge("regent.raft.last_index", metric.WithDescription("Index of the last raft entry in this node's log."))
	if err != nil {
		return err
	}
	leader, err := m.Int64ObservableGauge("regent.raft.leader_id", metric.WithDescription("Node id of the current leader (-1: none)."))
	if err != nil {
		return err
	}
	voters, err := m.Int64ObservableGauge("regent.raft.voters", metric.WithDescription("Number of voters in the raft configuration."))
	if err != nil {
		return err
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := state()
		roles := map[string]int64{"Follower": 0, "Candidate": 1, "Leader": 2, "Shutdown": 3}
		o.ObserveInt64(role, roles[s.State])
		o.ObserveInt64(term, int64(s.Term))
		o.ObserveInt64(commit, int64(s.CommitIndex))
		o.ObserveInt64(applied, int64(s.AppliedIndex))
		o.ObserveInt64(last, int64(s.LastIndex))
		o.ObserveInt64(leader, int64(s.LeaderID))
		o.ObserveInt64(voters, int64(len(s.Voters)))
		return nil
	}, role, term, commit, applied, last, leader, voters)
	if err != nil {
		return fmt.Errorf("register raft gauges: %w", err)
	}
	t.regs = append(t.regs, reg)
	return nil
}
