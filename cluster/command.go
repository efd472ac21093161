package cluster

import "github.com/regent-broker/regent/actors/replication"

// The replication contract lives in package replication, with its users;
// these aliases keep the cluster package's own names for code that has
// not moved to it (and for the replicators here, which implement it).

// Encodable is replication.Encodable.
type Encodable = replication.Encodable

// Decoder is replication.Decoder.
type Decoder = replication.Decoder

// AsyncApplier is replication.AsyncApplier.
type AsyncApplier = replication.AsyncApplier

var (
	// ErrNotEncodable is replication.ErrNotEncodable.
	ErrNotEncodable = replication.ErrNotEncodable
	// ErrNotLeader is replication.ErrNotLeader.
	ErrNotLeader = replication.ErrNotLeader
	// ErrOutcomeUnknown is replication.ErrOutcomeUnknown.
	ErrOutcomeUnknown = replication.ErrOutcomeUnknown
)

// RegisterDecoder is replication.RegisterDecoder.
func RegisterDecoder(kind string, dec Decoder) { replication.RegisterDecoder(kind, dec) }

// EncodeCommand is replication.EncodeCommand.
func EncodeCommand(cmd Command) (string, []byte, error) { return replication.EncodeCommand(cmd) }

// DecodeCommand is replication.DecodeCommand.
func DecodeCommand(kind string, payload []byte) (Command, error) {
	return replication.DecodeCommand(kind, payload)
}

// Traced is replication.Traced.
type Traced = replication.Traced

// WithTrace is replication.WithTrace.
func WithTrace(cmd Command, traceparent string) Command {
	return replication.WithTrace(cmd, traceparent)
}

func unwrapTrace(cmd Command) (Command, string) { return replication.UnwrapTrace(cmd) }
