package replication

import "errors"

// A local failure is an apply that failed for a reason of this node's own
// (its storage refused a write: a full disk, an I/O error), not for one
// the command decides. Every other node applies the same command, so with
// copies on several nodes this node's state would drift from theirs if it
// went on applying after it (a partition missing committed records, then
// taking the next ones at other offsets). A replicator that keeps copies
// must stop applying on this node at such a result (raft's stops the node:
// restarted, it applies the entry again from its last snapshot); the
// single-node one answers it like any other result (Kafka's
// KAFKA_STORAGE_ERROR).
//
// Appliers mark such an error with MarkLocal, and a result struct that
// carries one implements LocalFailer. FailedLocally finds either.

// LocalError is an error marked by MarkLocal.
type LocalError struct{ Err error }

func (e *LocalError) Error() string { return e.Err.Error() }
func (e *LocalError) Unwrap() error { return e.Err }

// MarkLocal marks err as a local failure (nil stays nil). It unwraps to err,
// so errors.Is on the cause (kerr.KafkaStorageError...) still holds.
func MarkLocal(err error) error {
	if err == nil {
		return nil
	}
	var le *LocalError
	if errors.As(err, &le) {
		return err
	}
	return &LocalError{Err: err}
}

// LocalFailer is implemented by apply results (structs) that may carry a
// local failure; LocalFailure returns it, nil when there is none.
type LocalFailer interface {
	LocalFailure() error
}

// FailedLocally returns the local failure an apply result carries: an
// error marked by MarkLocal, a LocalFailer's, or either among a slice of
// results (an entry's commands, a command's per-item errors); nil if none.
func FailedLocally(result any) error {
	switch r := result.(type) {
	case nil:
		return nil
	case LocalFailer:
		return r.LocalFailure()
	case error:
		var le *LocalError
		if errors.As(r, &le) {
			return le
		}
	case []error:
		for _, e := range r {
			if err := FailedLocally(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range r {
			if err := FailedLocally(e); err != nil {
				return err
			}
		}
	}
	return nil
}
