// Package protocol holds the Kafka request handlers: one file per API key,
// each opening with the versions it serves. Handlers run on the event loop
// and must not block: they route work to actors or to a goroutine and
// answer through Request.Respond.
package protocol

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/features"
	"github.com/regent-broker/regent/actors/group"
	"github.com/regent-broker/regent/actors/groupconfig"
	"github.com/regent-broker/regent/actors/quotas"
	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/actors/txn"
	"github.com/regent-broker/regent/actors/users"
)

// Config is what handlers need to know of the node.
type Config struct {
	NodeID    int32
	Host      string // advertised host
	Port      int32  // advertised port
	ClusterID string
	DataDir   string
	Logger    *slog.Logger
	// Rack is this node's rack (Kafka's broker.rack; "" none). Set on a
	// cluster's nodes, it turns on reads from followers (KIP-392): the
	// leader points a consumer whose client.rack names a follower's rack
	// at that follower, and the follower serves it (fetch_replica.go).
	Rack string
	// Cluster is the cluster's view; nil: a single node (this one).
	Cluster ClusterView
	// PartitionGroups says the cluster runs partition raft groups: share
	// requests, which clients send to each partition's leader, are then
	// forwarded to their group's coordinator, where share-partition state
	// is kept (share_forward.go), and a transactional batch is checked
	// with a transaction coordinator on another node (produce_txn.go).
	PartitionGroups bool
	// FetchBudget bounds the bytes fetches read from storage until their
	// responses are handed to the connection; ResponseBudget is the
	// network edge's budget of response bytes not yet sent, which a fetch
	// also leaves room in. nil: unbounded. See netio's budgets.
	FetchBudget, ResponseBudget *Budget
}

// Server dispatches requests to handlers.
type Server struct {
	cfg      Config
	log      *slog.Logger
	topics   *topics.Registry
	sessions *fetchSessions
	pids     *ProducerIDs
	groups   *group.Manager
	txns     *txn.Coordinator
	// coords spreads the coordinators over raft groups (nil: groups and
	// txns coordinate every key); set before serving (coordinators.go).
	coords  Coordinators
	cluster ClusterView
	// nodePIDs allocates producer ids for idempotent producers on a node
	// that is not the leader (nil: single node).
	nodePIDs *ProducerIDs
	// users is the SCRAM credential store (nil: none); set before serving.
	users *users.Store
	// tokenCfg configures delegation tokens (delegation_tokens.go); set
	// before serving.
	tokenCfg TokenConfig
	// authz checks every request's principal (nil: no authorizer, all
	// allowed); denials hears of its refusals. Set before serving.
	authz   *acls.Authorizer
	denials DenialObserver
	// features holds the finalized feature levels (nil: none advertised,
	// UpdateFeatures refused); set before serving.
	features *features.Store
	// forwarder carries a follower's metadata changes to the leader (nil:
	// none, single node); set before serving.
	forwarder Forwarder
	// quotas is the client quota store and enforcer (nil: none); set
	// before serving (quotas.go).
	quotas *quotaState
	// clientMetrics holds the CLIENT_METRICS subscriptions and, when client
	// telemetry is exported, the client instances (nil: none, KIP-714's
	// APIs not advertised); set before serving (configs_client_metrics.go).
	clientMetrics *clientMetrics
	// groupConfigs holds the GROUP config resources (nil: refused); set
	// before serving (configs_group.go).
	groupConfigs *groupconfig.Store
	// share is the share-group data path (nil: share groups not served);
	// set before serving (share_core.go).
	share *shareState
	// streamsCreating tracks streams groups' internal topics being
	// created (streams_create.go).
	streamsCreating streamsCreations
	// remoteTxns orders transactional batches checked with a coordinator
	// on another node (produce_txn_order.go).
	remoteTxns remoteTxnOrder
}

// SetNodeProducerIDs installs the node's own allocator for non-transactional
// InitProducerId on followers (cluster mode); call before serving.
func (s *Server) SetNodeProducerIDs(p *ProducerIDs) { s.nodePIDs = p }

// NewServer makes the request dispatcher.
func NewServer(cfg Config, reg *topics.Registry, pids *ProducerIDs, groups *group.Manager, txns *txn.Coordinator) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	view := cfg.Cluster
	if view == nil {
		view = singleNode{self: BrokerAddr{ID: cfg.NodeID, Host: cfg.Host, Port: cfg.Port, Rack: cfg.Rack}, id: cfg.ClusterID}
	}
	return &Server{cfg: cfg, log: cfg.Logger, topics: reg, sessions: newFetchSessions(1000), pids: pids, groups: groups, txns: txns, cluster: view}
}

// api describes one served API key.
type api struct {
	min, max int16
	serve    func(s *Server, r *Request)
}

// apis is the table of served keys; ApiVersions advertises exactly this.
var apis = map[int16]api{}

// register adds a key to the table; called from each handler file's init.
func register(key int16, min, max int16, serve func(s *Server, r *Request)) {
	if _, dup := apis[key]; dup {
		panic(fmt.Sprintf("api key %d registered twice", key))
	}
	apis[key] = api{min: min, max: max, serve: serve}
}

// VersionRange reports the versions served for key.
func VersionRange(key int16) (min, max int16, ok bool) {
	a, ok := apis[key]
	return a.min, a.max, ok
}

// ServedKeys lists the served keys in order.
func ServedKeys() []int16 {
	keys := make([]int16, 0, len(apis))
	for k := range apis {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// Decode builds the typed request. An unknown key or an unserved version
// is an error (the connection closes, as Kafka does), except ApiVersions,
// which is answered at any version so that clients can negotiate.
func (s *Server) Decode(h Header, body []byte) (*Request, error) {
	var start time.Time // for request_percentage; read only with one set
	if s.quotaLimits(quotas.RequestPercentage) {
		start = time.Now()
	}
	a, ok := apis[h.Key]
	if h.Key == 18 && (!ok || h.Version < a.min || h.Version > a.max) {
		// Answered in Serve with UNSUPPORTED_VERSION at v0.
		return NewRequest(h, &kmsg.ApiVersionsRequest{Version: h.Version}), nil
	}
	if !ok {
		return nil, fmt.Errorf("api key %d is not served", h.Key)
	}
	if h.Version < a.min || h.Version > a.max {
		return nil, fmt.Errorf("%s v%d is not served (versions %d-%d)", kmsg.NameForKey(h.Key), h.Version, a.min, a.max)
	}
	msg := newRequest(h.Key, h.Version)
	if err := decodeBody(msg, body); err != nil {
		return nil, fmt.Errorf("%w: %s v%d: %v", ErrMalformed, kmsg.NameForKey(h.Key), h.Version, err)
	}
	r := NewRequest(h, msg)
	s.startRequestClock(r, start)
	return r, nil
}

// requestTypes holds the request types of keys whose newest served
// versions kmsg does not know (a handler file's init adds its key); the
// others are kmsg's.
var requestTypes = map[int16]func() kmsg.Request{}

// newRequest is an empty request of key at version, for decoding.
func newRequest(key, version int16) kmsg.Request {
	var msg kmsg.Request
	if mk := requestTypes[key]; mk != nil {
		msg = mk()
	} else {
		msg = kmsg.RequestForKey(key)
	}
	msg.SetVersion(version)
	return msg
}

// decodeBody parses a body, turning a decoder panic on hostile input into an
// error.
func decodeBody(msg kmsg.Request, body []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decode panic: %v", r)
		}
	}()
	return msg.ReadFrom(body)
}

// Serve runs the handler for r on the calling goroutine (the event loop).
func (s *Server) Serve(r *Request) {
	a := apis[r.Key]
	r.clock.begin(&r.clock.loop)
	defer func() {
		r.clock.end(&r.clock.loop)
		if p := recover(); p != nil {
			s.log.ErrorContext(r.Context(), "handler panicked", "api", kmsg.NameForKey(r.Key), "version", r.Version, "panic", p, "stack", string(debug.Stack()))
			r.Respond(errorResponse(r, p))
		}
	}()
	a.serve(s, r)
}

// async runs fn off the event loop and answers with its response. For
// handlers that touch the disk or wait.
func (s *Server) async(r *Request, fn func() kmsg.Response) {
	go func() {
		r.clock.begin(&r.clock.work)
		defer func() {
			if p := recover(); p != nil {
				s.log.ErrorContext(r.Context(), "handler panicked", "api", kmsg.NameForKey(r.Key), "version", r.Version, "panic", p, "stack", string(debug.Stack()))
				r.Respond(errorResponse(r, p))
			}
		}()
		resp := fn()
		r.clock.end(&r.clock.work)
		r.Respond(resp)
	}()
}

// ctxOf is the context of a trace handle (nil: the background), for
// ...Context logging.
func ctxOf(tr RequestTrace) context.Context {
	if tr == nil {
		return context.Background()
	}
	return tr.Context()
}
