package cluster

import (
	"errors"
	"fmt"
	"sync"
)

// Encodable is a command that can travel in the raft log. Every command a
// replicated applier receives must implement it; the single-node Local
// replicator passes commands as values and never encodes them.
type Encodable interface {
	// CommandKind names the decoder registered with RegisterDecoder.
	CommandKind() string
	// AppendCommand appends the command's encoding to b.
	AppendCommand(b []byte) []byte
}

// Decoder rebuilds a command from its encoding. The payload aliases the
// raft entry: a decoder copies any bytes it keeps or mutates.
type Decoder func(payload []byte) (Command, error)

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
		panic(fmt.Sprintf("cluster: command kind %q registered twice", kind))
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

// DecodeCommand decodes a command of the given kind.
func DecodeCommand(kind string, payload []byte) (Command, error) {
	decoders.RLock()
	dec := decoders.m[kind]
	decoders.RUnlock()
	if dec == nil {
		return nil, fmt.Errorf("cluster: no decoder for command kind %q", kind)
	}
	cmd, err := dec(payload)
	if err != nil {
		return nil, fmt.Errorf("decode %s command: %w", kind, err)
	}
	return cmd, nil
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

// ErrNotLeader is the error a proposal gets on a node that is not the
// raft leader (or not yet caught up as one): the client should find the
// leader in Metadata and retry there.
var ErrNotLeader = errors.New("not the cluster leader")
