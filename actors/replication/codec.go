package replication

import (
	"errors"
	"fmt"
	"sync"
)

// Encodable is a command that can travel in the raft log. Every command a
// replicated applier receives must implement it; the single-node
// replicator passes commands as values and never encodes them.
type Encodable interface {
	// CommandKind names the decoder registered with RegisterDecoder.
	CommandKind() string
	// AppendCommand appends the command's encoding to b.
	AppendCommand(b []byte) []byte
}

// CommandSizer is an Encodable that knows its encoded size roughly (within
// a few bytes), so the raft replicator batches big commands by size without
// encoding them first. Others count as small.
type CommandSizer interface {
	CommandSize() int
}

// Decoder rebuilds a command from its encoding. The payload aliases the
// raft entry: a decoder copies any bytes it keeps or mutates.
type Decoder func(payload []byte) (Command, error)

// decoders is written by RegisterDecoder (package inits) and read by any
// goroutine that decodes.
var decoders = struct {
	sync.RWMutex
	m map[string]Decoder
}{m: map[string]Decoder{}}

// RegisterDecoder makes dec the decoder for kind; call it from an init.
// Registering a kind twice is a broken invariant.
func RegisterDecoder(kind string, dec Decoder) {
	decoders.Lock()
	defer decoders.Unlock()
	if _, dup := decoders.m[kind]; dup {
		panic(fmt.Sprintf("replication: command kind %q registered twice", kind))
	}
	decoders.m[kind] = dec
}

// ErrNotEncodable says a command cannot be replicated.
var ErrNotEncodable = errors.New("command is not encodable")

// EncodeCommand returns cmd's kind and encoding.
func EncodeCommand(cmd Command) (string, []byte, error) {
	e, ok := cmd.(Encodable)
	if !ok {
		return "", nil, fmt.Errorf("%w: %T", ErrNotEncodable, cmd)
	}
	return e.CommandKind(), e.AppendCommand(nil), nil
}

// ErrUnreadable says a command (or entry) was written by a newer version
// than this node's: an unknown kind, or a newer encoding of a known one.
// Skipping it would let this node's state drift from the others', so the
// raft replicator stops the node instead until it is upgraded. Decoders
// wrap it for an encoding version newer than they know; a malformed
// command of a known version is another error, refused alike everywhere.
var ErrUnreadable = errors.New("written by a newer version than this node's")

// DecodeCommand decodes a command of the given kind.
func DecodeCommand(kind string, payload []byte) (Command, error) {
	decoders.RLock()
	dec := decoders.m[kind]
	decoders.RUnlock()
	if dec == nil {
		return nil, fmt.Errorf("replication: no decoder for command kind %q: %w", kind, ErrUnreadable)
	}
	cmd, err := dec(payload)
	if err != nil {
		return nil, fmt.Errorf("decode %s command: %w", kind, err)
	}
	return cmd, nil
}

// Traced wraps a proposed command with the proposing request's W3C
// traceparent, so that every node's apply joins the request's trace.
type Traced struct {
	Command     Command
	TraceParent string
}

// WithTrace wraps cmd with traceparent ("" returns cmd unchanged).
func WithTrace(cmd Command, traceparent string) Command {
	if traceparent == "" {
		return cmd
	}
	return &Traced{Command: cmd, TraceParent: traceparent}
}

// UnwrapTrace returns the command inside a Traced, and its traceparent.
func UnwrapTrace(cmd Command) (Command, string) {
	if t, ok := cmd.(*Traced); ok {
		return t.Command, t.TraceParent
	}
	return cmd, ""
}
