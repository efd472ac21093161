package netio

import (
	"sync/atomic"

	"github.com/regent-broker/regent/protocol"
)

// DefaultMaxMemory is the memory the network edge and fetches may hold
// when none is configured.
const DefaultMaxMemory = 512 << 20

// Budgets are the byte budgets derived from one memory setting.
//
// The split of MaxMemory M:
//   - Request, 3/8 M: request bytes read and not yet answered: partially
//     read frames (their buffers as allocated), bytes gnet holds for a
//     connection that waits, and whole frames until their response (decoded
//     requests alias their frame).
//   - Response, 3/8 M: response bytes handed to connections and not yet
//     taken by the socket (our reorder queue plus gnet's outbound buffer).
//   - Fetch, 1/4 M: bytes fetches have read from storage and not yet handed
//     to their connection.
//
// Request and Response are held within their capacity by closing
// connections (see Server); Fetch by serving fetches smaller. Response can
// pass its capacity by what fetches in progress hold (at most Fetch's
// capacity plus one batch per fetch served its first batch), as a fetch
// checks the room left when it starts. What the edge holds is therefore
// below about M plus a batch per consuming connection; the Go heap adds
// garbage on top (see the process's GOMEMLIMIT, set from M in cmd/regent).
type Budgets struct {
	Request, Response, Fetch *protocol.Budget

	// requestPeak is the request budget's highest use seen when bytes
	// were taken from it (reserve), for tests and metrics.
	requestPeak atomic.Int64
}

// NewBudgets splits maxMemory bytes (<= 0: DefaultMaxMemory) into the
// request, response and fetch budgets.
func NewBudgets(maxMemory int64) *Budgets {
	if maxMemory <= 0 {
		maxMemory = DefaultMaxMemory
	}
	return &Budgets{
		Request:  protocol.NewBudget("request", maxMemory*3/8),
		Response: protocol.NewBudget("response", maxMemory*3/8),
		Fetch:    protocol.NewBudget("fetch", maxMemory/4),
	}
}

// closeReason is why the server closed a connection, for the counters.
type closeReason int

const (
	closeMaxConnections      closeReason = iota // over MaxConnections
	closeRequestSize                            // a frame over MaxRequestBytes or negative
	closeBadRequest                             // an unparsable header or unserved request
	closeRequestBudget                          // no request budget left, this or a larger holder closed
	closeInboundFlood                           // kept sending while told to wait
	closeFrameTimeout                           // a frame not whole within FrameTimeout (slowloris)
	closeWriteStall                             // responses unsent for WriteTimeout (a client that never reads)
	closeIdle                                   // idle for IdleTimeout
	closeAuth                                   // SASL refused, or a request not allowed before authentication
	closeTLSHandshake                           // TLS handshake failed or not done within FrameTimeout
	closeSendFailed                             // a response cut short mid-file (sendfile or read failed)
	closeConnectionRate                         // over its address's connection_creation_rate, held then closed
	closeMaxConnectionsPerIP                    // over its address's PerIPLimit
	numCloseReasons
)

var closeReasonNames = [numCloseReasons]string{
	"max_connections", "request_size", "bad_request", "request_budget",
	"inbound_flood", "frame_timeout", "write_stall", "idle", "auth",
	"tls_handshake", "send_failed", "connection_rate", "max_connections_per_ip",
}

// closeCounts counts connections closed by the server, by reason.
type closeCounts [numCloseReasons]atomic.Int64

// BudgetStat is one budget's use. For the request budget, Releasing is
// what of Used connections closed for the budget hold until their close
// runs, and Peak the highest Used so far (0 for the others).
type BudgetStat struct {
	Name                            string
	Used, Capacity, Releasing, Peak int64
}

// CloseStat is how many connections were closed for one reason.
type CloseStat struct {
	Reason string
	Count  int64
}

// MemoryStats is the edge's budget use and the connections closed for
// each limit, for metrics.
type MemoryStats struct {
	Budgets []BudgetStat
	Closed  []CloseStat
	// HandedOff counts connections moved off the event loop because they
	// kept sending while told to wait (handoff.go).
	HandedOff int64
}

// MemoryStats reports the budgets and close counters. Safe from any
// goroutine.
func (s *Server) MemoryStats() MemoryStats {
	var st MemoryStats
	for _, b := range []*protocol.Budget{s.budgets.Request, s.budgets.Response, s.budgets.Fetch} {
		if b != nil {
			st.Budgets = append(st.Budgets, BudgetStat{Name: b.Name(), Used: b.Used(), Capacity: b.Capacity()})
		}
	}
	if len(st.Budgets) > 0 && s.budgets.Request != nil {
		st.Budgets[0].Releasing = s.evicting.pending.Load()
		st.Budgets[0].Peak = s.budgets.requestPeak.Load()
	}
	st.HandedOff = s.handoffs.Load()
	for r := range s.closed {
		st.Closed = append(st.Closed, CloseStat{Reason: closeReasonNames[r], Count: s.closed[r].Load()})
	}
	return st
}

// Budgets returns the server's budgets.
func (s *Server) Budgets() *Budgets { return s.budgets }
