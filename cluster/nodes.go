package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/regent-broker/regent/storage/atomicfile"
)

// NodesKey is the replicator key of the node directory.
const NodesKey = "nodes"

// Nodes is the replicated directory of cluster nodes: which Kafka, raft
// and admin address each node id has. Raft knows only raft addresses;
// Metadata needs the Kafka ones of every voter. It is persisted in the
// state directory (and so in raft snapshots).
type Nodes struct {
	path string
	mu   struct {
		sync.RWMutex // guards the fields; written only by Apply (the FSM goroutine) and Reload
		m            map[int32]Peer
		clusterID    string
		// shards is the coordinator shard count, -1 until fixed.
		shards int
	}
}

// OpenNodes loads the directory from stateDir/meta/nodes.json.
func OpenNodes(stateDir string) (*Nodes, error) {
	n := &Nodes{path: filepath.Join(stateDir, "meta", "nodes.json")}
	m, id, err := n.load()
	if err != nil {
		return nil, err
	}
	n.mu.m, n.mu.clusterID, n.mu.shards = m, id, n.loadShards()
	return n, nil
}

// Reload replaces the directory with what the state directory holds now:
// a snapshot installed on the running node rewrote it. Call it where no
// Apply runs (the FSM goroutine, inside the restore); readers see the old
// directory or the new one, never a mix. On error the directory is left
// as it was.
func (n *Nodes) Reload() error {
	m, id, err := n.load()
	if err != nil {
		return err
	}
	shards := n.loadShards()
	n.mu.Lock()
	n.mu.m, n.mu.clusterID, n.mu.shards = m, id, shards
	n.mu.Unlock()
	return nil
}

// load reads the node directory and the cluster id from disk.
func (n *Nodes) load() (map[int32]Peer, string, error) {
	m := map[int32]Peer{}
	var clusterID string
	if raw, err := os.ReadFile(filepath.Join(filepath.Dir(n.path), clusterIDFile)); err == nil {
		clusterID = string(raw)
	}
	raw, err := os.ReadFile(n.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, "", fmt.Errorf("read node directory: %w", err)
	default:
		var peers []Peer
		if err := json.Unmarshal(raw, &peers); err != nil {
			return nil, "", fmt.Errorf("parse %s: %w", n.path, err)
		}
		for _, p := range peers {
			m[p.ID] = p
		}
	}
	return m, clusterID, nil
}

// Get returns a node's entry.
func (n *Nodes) Get(id int32) (Peer, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	p, ok := n.mu.m[id]
	return p, ok
}

// All lists every known node by id.
func (n *Nodes) All() []Peer {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]Peer, 0, len(n.mu.m))
	for _, p := range n.mu.m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// nodeUpsert records a node's addresses; nodeRemove forgets a node.
type nodeUpsert struct{ Peer Peer }
type nodeRemove struct{ ID int32 }

// UpsertNode is the command that records p.
func UpsertNode(p Peer) Command { return &nodeUpsert{Peer: p} }

// RemoveNode is the command that forgets node id.
func RemoveNode(id int32) Command { return &nodeRemove{ID: id} }

func (c *nodeUpsert) CommandKind() string { return "nodes.upsert" }
func (c *nodeUpsert) AppendCommand(b []byte) []byte {
	raw, _ := json.Marshal(c.Peer)
	return append(b, raw...)
}
func (c *nodeRemove) CommandKind() string { return "nodes.remove" }
func (c *nodeRemove) AppendCommand(b []byte) []byte {
	raw, _ := json.Marshal(c.ID)
	return append(b, raw...)
}

func init() {
	RegisterDecoder("nodes.upsert", func(p []byte) (Command, error) {
		var c nodeUpsert
		return &c, json.Unmarshal(p, &c.Peer)
	})
	RegisterDecoder("nodes.remove", func(p []byte) (Command, error) {
		var c nodeRemove
		return &c, json.Unmarshal(p, &c.ID)
	})
}

// Apply implements Applier.
func (n *Nodes) Apply(cmd Command) any {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch c := cmd.(type) {
	case *nodeUpsert:
		n.mu.m[c.Peer.ID] = c.Peer
	case *nodeRemove:
		delete(n.mu.m, c.ID)
	case *coordinatorShardsCmd:
		if n.mu.shards >= 0 {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(n.path), 0o755); err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(filepath.Dir(n.path), coordinatorShardsFile), []byte(strconv.Itoa(c.N))); err != nil {
			return fmt.Errorf("persist coordinator shards: %w", err)
		}
		n.mu.shards = c.N
		return nil
	case *clusterIDCmd:
		if n.mu.clusterID != "" {
			return nil
		}
		n.mu.clusterID = c.ID
		if err := os.MkdirAll(filepath.Dir(n.path), 0o755); err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(filepath.Dir(n.path), clusterIDFile), []byte(c.ID)); err != nil {
			return fmt.Errorf("persist cluster id: %w", err)
		}
		return nil
	default:
		return fmt.Errorf("node directory: unknown command %T", cmd)
	}
	peers := make([]Peer, 0, len(n.mu.m))
	for _, p := range n.mu.m {
		peers = append(peers, p)
	}
	sort.Slice(peers, func(i, j int) bool { return peers[i].ID < peers[j].ID })
	raw, err := json.MarshalIndent(peers, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(n.path), 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(n.path, raw); err != nil {
		return fmt.Errorf("persist node directory: %w", err)
	}
	return nil
}

// clusterIDFile holds the cluster id, chosen by the first leader and
// replicated so that every node reports the same one.
const clusterIDFile = "cluster-id"

type clusterIDCmd struct{ ID string }

// SetClusterID is the command that fixes the cluster id (first one wins).
func SetClusterID(id string) Command { return &clusterIDCmd{ID: id} }

func (c *clusterIDCmd) CommandKind() string           { return "nodes.cluster_id" }
func (c *clusterIDCmd) AppendCommand(b []byte) []byte { return append(b, c.ID...) }

func init() {
	RegisterDecoder("nodes.cluster_id", func(p []byte) (Command, error) { return &clusterIDCmd{ID: string(p)}, nil })
}

// ClusterID returns the replicated cluster id ("" before the first leader
// chose it).
func (n *Nodes) ClusterID() string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.mu.clusterID
}

// coordinatorShardsFile holds the coordinator shard count.
const coordinatorShardsFile = "coordinator-shards"

// coordinatorShardsCmd fixes how many raft groups the group and
// transaction coordinators are spread over (first one wins, as Kafka's
// offsets.topic.num.partitions is fixed when __consumer_offsets is made):
// a key's coordinator never moves to another shard, so its state is never
// left behind.
type coordinatorShardsCmd struct{ N int }

// SetCoordinatorShards is the command that fixes the coordinator shard
// count: 0 keeps every coordinator on the metadata group; n > 0 places
// them on partition raft groups 1..n by hash of their key.
func SetCoordinatorShards(n int) Command { return &coordinatorShardsCmd{N: n} }

func (c *coordinatorShardsCmd) CommandKind() string { return "nodes.coordinator_shards" }
func (c *coordinatorShardsCmd) AppendCommand(b []byte) []byte {
	return strconv.AppendInt(b, int64(c.N), 10)
}

func init() {
	RegisterDecoder("nodes.coordinator_shards", func(p []byte) (Command, error) {
		n, err := strconv.Atoi(string(p))
		if err != nil || n < 0 || n > 255 {
			return nil, fmt.Errorf("coordinator shards %q: not a count of raft groups", p)
		}
		return &coordinatorShardsCmd{N: n}, nil
	})
}

// loadShards reads the coordinator shard count (-1: not fixed yet; an
// unreadable file reads as not fixed, and the leader fixes it again with
// what every node applied).
func (n *Nodes) loadShards() int {
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(n.path), coordinatorShardsFile))
	if err != nil {
		return -1
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || v < 0 {
		return -1
	}
	return v
}

// CoordinatorShards returns the coordinator shard count and whether the
// cluster fixed it yet (SetCoordinatorShards).
func (n *Nodes) CoordinatorShards() (int, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return max(n.mu.shards, 0), n.mu.shards >= 0
}
