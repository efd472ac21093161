package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/regent-broker/regent/netio/certs"
	"github.com/regent-broker/regent/protocol"
)

// Every listener's addresses in a cluster. Kafka answers Metadata,
// DescribeCluster and FindCoordinator with every broker's address on the
// listener the request came in on; the raft directory holds one Kafka
// address per node (its first listener's). So each node serves its own
// advertised listeners at GET /cluster/listeners on its admin endpoint,
// and every node reads its peers' there: a SASL_PLAINTEXT client is then
// sent to the other nodes' SASL_PLAINTEXT listeners, not their PLAINTEXT
// ones (where its handshake is refused).

const (
	// peerListenersRefresh is how often a known peer's listeners are read
	// again (a node restarted with other listeners); a peer not known yet
	// is asked every peerListenersTick.
	peerListenersRefresh = 10 * time.Second
	peerListenersTick    = time.Second
)

// rackHeader carries a node's rack on its GET /cluster/listeners answer
// (a header, so nodes of versions that read only the body are unaffected).
const rackHeader = "X-Regent-Rack"

// serveListeners adds GET /cluster/listeners: this node's advertised
// address of each listener, by name, and its rack.
func (a *adminServer) serveListeners(advertised map[string]string, rack string) {
	mux, ok := a.srv.Handler.(*http.ServeMux)
	if !ok {
		a.logger.Error("admin endpoint has no mux: peers advertise this node's first listener only")
		return
	}
	mux.HandleFunc("GET /cluster/listeners", func(w http.ResponseWriter, _ *http.Request) {
		if rack != "" {
			w.Header().Set(rackHeader, rack)
		}
		writeJSON(w, http.StatusOK, advertised)
	})
}

// peerListeners is what this node knows of the other voters' listeners.
type peerListeners struct {
	view   *raftView
	client *http.Client
	scheme string

	// mu guards the fields; written by run's goroutine, read by the
	// listeners' Peer lookups on any connection's goroutine.
	mu struct {
		sync.RWMutex
		addrs map[int32]map[string]protocol.BrokerAddr
		racks map[int32]string
		at    map[int32]time.Time // when addrs[id] was last read
	}
}

func newPeerListeners(view *raftView, linkCerts *certs.Store) *peerListeners {
	pl := &peerListeners{view: view}
	pl.client, pl.scheme = adminHTTP(linkCerts, peerListenersTick)
	pl.mu.addrs = map[int32]map[string]protocol.BrokerAddr{}
	pl.mu.at = map[int32]time.Time{}
	pl.mu.racks = map[int32]string{}
	return pl
}

// lookup is a protocol.Listener's Peer function for the listener name.
func (pl *peerListeners) lookup(name string) func(id int32) (protocol.BrokerAddr, bool) {
	return func(id int32) (protocol.BrokerAddr, bool) {
		pl.mu.RLock()
		defer pl.mu.RUnlock()
		a, ok := pl.mu.addrs[id][name]
		return a, ok
	}
}

// run reads the voters' listeners until stop closes: each unknown one
// every second, each known one every peerListenersRefresh. A peer that
// does not answer keeps what was read last.
func (pl *peerListeners) run(stop <-chan struct{}) {
	tick := time.NewTicker(peerListenersTick)
	defer tick.Stop()
	for {
		for _, id := range pl.view.Voters() {
			if id == pl.view.self {
				continue
			}
			pl.mu.RLock()
			at, known := pl.mu.at[id]
			pl.mu.RUnlock()
			if known && time.Since(at) < peerListenersRefresh {
				continue
			}
			p, ok := pl.view.peer(id)
			if !ok || p.Admin == "" {
				continue
			}
			addrs, rack, err := pl.read(p.ID, p.Admin)
			if err != nil {
				continue // down or restarting: Metadata leaves it out meanwhile
			}
			pl.mu.Lock()
			pl.mu.addrs[id], pl.mu.racks[id], pl.mu.at[id] = addrs, rack, time.Now()
			pl.mu.Unlock()
		}
		select {
		case <-tick.C:
		case <-stop:
			return
		}
	}
}

// rackOf returns a lookup of each node's rack: self's is given, the
// others' are what they last said.
func (pl *peerListeners) rackOf(self string) func(id int32) string {
	return func(id int32) string {
		if id == pl.view.self {
			return self
		}
		pl.mu.RLock()
		defer pl.mu.RUnlock()
		return pl.mu.racks[id]
	}
}

// read asks node id's admin endpoint for its listeners and rack.
func (pl *peerListeners) read(id int32, admin string) (map[string]protocol.BrokerAddr, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), peerListenersTick)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pl.scheme+admin+"/cluster/listeners", nil)
	if err != nil {
		return nil, "", fmt.Errorf("node %d listeners: %w", id, err)
	}
	resp, err := pl.client.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("node %d listeners: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		// A node of a version without the endpoint: its first
		// listener's address is all there is.
		return map[string]protocol.BrokerAddr{}, "", nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("node %d listeners: HTTP %d", id, resp.StatusCode)
	}
	var byName map[string]string
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&byName); err != nil {
		return nil, "", fmt.Errorf("node %d listeners: %w", id, err)
	}
	out := make(map[string]protocol.BrokerAddr, len(byName))
	for name, hp := range byName {
		out[name] = protocol.ParseBrokerAddr(id, hp)
	}
	return out, resp.Header.Get(rackHeader), nil
}
