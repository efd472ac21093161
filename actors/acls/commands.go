package acls

import (
	"encoding/json"
	"fmt"

	"github.com/regent-broker/regent/actors/replication"
)

// replKey is the replicator key the store applies: every ACL change in one
// total order.
const replKey = "acls"

// Command kinds in the raft log; renaming one breaks replaying old logs.
const (
	kindCreate = "acls.create"
	kindDelete = "acls.delete"
)

// createCmd adds bindings (already validated by the proposer); ones already
// present are left as they are.
type createCmd struct {
	ACLs []ACL `json:"acls"`
}

// deleteCmd removes what each filter matches when applied, so every node
// removes the same bindings whatever the proposer saw.
type deleteCmd struct {
	Filters []Filter `json:"filters"`
}

func (*createCmd) CommandKind() string { return kindCreate }
func (*deleteCmd) CommandKind() string { return kindDelete }

func (c *createCmd) AppendCommand(b []byte) []byte { return appendJSON(b, c) }
func (c *deleteCmd) AppendCommand(b []byte) []byte { return appendJSON(b, c) }

// appendJSON appends v's JSON. The commands are plain structs of strings
// and small enums, which always marshal; failing is a broken invariant.
func appendJSON(b []byte, v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("acls: encode %T: %v", v, err))
	}
	return append(b, raw...)
}

func init() {
	replication.RegisterDecoder(kindCreate, decodeJSON[createCmd])
	replication.RegisterDecoder(kindDelete, decodeJSON[deleteCmd])
}

// decodeJSON decodes a *T; json.Unmarshal copies what it keeps.
func decodeJSON[T any](payload []byte) (replication.Command, error) {
	c := new(T)
	if err := json.Unmarshal(payload, c); err != nil {
		return nil, err
	}
	return c, nil
}
