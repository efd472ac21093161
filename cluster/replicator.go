// Package cluster holds the raft replicator, which implements the
// replication contract (package replication) across nodes: every state
// change is a command proposed to a replicator and applied, in commit
// order, by the applier registered for its key (a partition, a group, the
// topic registry) on every node, so offsets, sequence checks and
// generations are decided inside Apply and every node reaches the same
// state. The single-node replicator (Local) lives in package replication;
// the aliases here keep the names code outside the actors still uses.
package cluster

import "github.com/regent-broker/regent/actors/replication"

// Command is replication.Command.
type Command = replication.Command

// Applier is replication.Applier.
type Applier = replication.Applier

// Replicator is replication.Replicator.
type Replicator = replication.Replicator

// Local is replication.Local: applied at once on the proposer's goroutine,
// answered on its callback goroutine.
type Local = replication.Local

// NewLocal is replication.NewLocal.
func NewLocal() *Local { return replication.NewLocal() }

var (
	_ Replicator             = (*Raft)(nil)
	_ replication.FreeAtDone = (*Raft)(nil)
)
