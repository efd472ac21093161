// Package replication is the contract between the code that changes
// replicated state (partitions, the topic registry, group and transaction
// coordinators, the ACL and SCRAM stores, producer ids) and the replicator
// that orders and commits those changes (package cluster: Local on a single
// node, Raft in a cluster). It links neither raft nor the cluster package,
// so actor packages depend on the contract only.
//
// Every state change is a Command proposed for a key and applied, in commit
// order, by the Applier registered for that key on every node. The proposer
// learns the outcome through done:
//
//  1. done is called exactly once per Propose.
//  2. done is never called inline: never on the proposer's goroutine while
//     Propose runs, and never before Propose has finished its own work (it
//     runs on a replicator goroutine, possibly at once after Propose
//     returns). A proposer may hold its locks across Propose; done must not
//     wait for the proposer, nor block at all: one goroutine may run the
//     callbacks of many proposals, in proposal order.
//  3. An outcome the replicator cannot know (leadership lost after the
//     entry was appended, a shutdown with entries in flight, an applier
//     closed before it answered) is an error wrapping ErrOutcomeUnknown,
//     never a success and never a definite failure: the command may or may
//     not have been applied. Definite failures (ErrNotLeader before the
//     command was appended, a command that cannot be encoded, no applier
//     for the key) are other errors; the command was not applied.
//
// Propose (the generic function) adds the command's own result type on
// top: callers get R, not any.
package replication

import "errors"

// Command is a state change. Replicated (raft) commands implement
// Encodable; the single-node replicator passes them as values.
type Command any

// Termed is a command that is told the raft term of the entry that
// committed it, before it is applied. Terms only grow along the log, and
// every node reads the same term for an entry, so a partition stamps it as
// the leader epoch of what it appends (Kafka's partition leader epoch:
// raised at every leadership change). The single-node replicator never
// calls it (term 0: the epoch stays the log's own).
type Termed interface {
	SetTerm(term uint64)
}

// Applier applies committed commands for one key. Apply runs on the
// goroutine that owns the key's state: with the single-node replicator the
// proposer's (the key's actor), with raft the FSM's (or, for an
// AsyncApplier, the actor's, through ApplyAsync). Apply must be
// deterministic: every node applies the same commands to the same state.
type Applier interface {
	Apply(cmd Command) any
}

// AsyncApplier is an applier whose state another goroutine owns (an
// actor). The raft replicator hands it committed commands with ApplyAsync;
// done must be called exactly once, with Apply's result, after the command
// is applied. Commands for one key are handed over in log order and must
// be applied in that order.
type AsyncApplier interface {
	Applier
	ApplyAsync(cmd Command, done func(result any))
}

// Replicator orders and commits commands. See the package doc for the
// contract done follows.
type Replicator interface {
	// Register makes a the applier for key; it replaces any previous one.
	Register(key string, a Applier)
	// Unregister forgets key's applier.
	Unregister(key string)
	// Propose commits cmd and applies it; done receives Apply's result on
	// this node, or an error: ErrNotLeader (wrapped) or another definite
	// failure when the command was not applied, an error wrapping
	// ErrOutcomeUnknown when it may or may not have been.
	Propose(key string, cmd Command, done func(result any, err error))
}

// FreeAtDone is implemented by replicators that have stopped reading a
// command by the time they call its done: Local applies it inside
// Propose; raft's encodes it into an entry before it can answer it, and
// answers one it never took without reading it. A proposer may then reuse
// the buffers the command points into once done has run.
type FreeAtDone interface {
	Replicator
	CommandFreeAtDone()
}

var (
	// ErrNotLeader is the error a proposal gets on a node that is not the
	// leader (or not yet caught up as one) before its command was
	// appended: the command was not applied, and the client should find
	// the leader in Metadata and retry there.
	ErrNotLeader = errors.New("not the cluster leader")

	// ErrOutcomeUnknown wraps a proposal whose command may or may not have
	// been applied: leadership was lost after the entry was appended, the
	// replicator shut down with it in flight, its applier closed before
	// answering, or a waiter gave up. Callers must not assume either
	// outcome (Kafka's REQUEST_TIMED_OUT tells a client just that).
	ErrOutcomeUnknown = errors.New("outcome unknown: the command may or may not have been applied")

	// ErrNoApplier: no applier is registered for the key on this node;
	// the command was not applied.
	ErrNoApplier = errors.New("no applier registered")

	// ErrUnexpectedResult: Apply returned a value of another type than
	// the command's result type, a broken invariant reported to the
	// proposer as an error (the command was applied).
	ErrUnexpectedResult = errors.New("unexpected apply result")
)
