package main

import (
	"log/slog"
	"runtime/debug"
)

// defaultGCPercent is the collector's target the broker runs with when the
// user's environment does not set one: the heap may grow to this percent
// over the live heap before a collection starts, against the runtime's 100.
//
// The produce path allocates a frame buffer per request (about 97% of the
// bytes allocated under ProducerPerformance), all of it short-lived, while
// the live heap stays small, so each collection marks little and a higher
// target mostly means fewer collections. But the heap's peak grows with the
// target, and issue 13 caps peak RSS at 118 MB over the bench workload,
// whose 4 producers and 4 consumers on 24 partitions peak highest. Measured
// there (2 loaded cores, medians): 200 cut the broker's CPU per GB produced
// with acks=all by 13% (2.40 against 2.77 s/GB, 9 runs each) with peak RSS
// at most 91 MB, as at 100; 300 peaked at 88-111 MB (median 107) and 400 at
// 93-135 MB with 4 producers alone.
// The soft memory limit from --max-memory (setMemoryLimit) still bounds the
// heap when the live size is large.
const defaultGCPercent = 200

// tuneGC applies defaultGCPercent unless GOGC or GOMEMLIMIT is set in
// getenv, which must be the process environment (os.Getenv): the runtime
// read both from it at start, and a user who set either has chosen the
// collector's behaviour, so the broker does not touch the GC percent. It
// logs the choice once and reports whether it changed the runtime.
func tuneGC(getenv func(string) string, logger *slog.Logger) bool {
	gogc, memlimit := getenv("GOGC"), getenv("GOMEMLIMIT")
	if gogc != "" || memlimit != "" {
		logger.Info("go collector left as the environment set it",
			"GOGC", gogc, "GOMEMLIMIT", memlimit)
		return false
	}
	debug.SetGCPercent(defaultGCPercent)
	logger.Info("go collector tuned",
		"gc_percent", defaultGCPercent,
		"memory_limit", "1.5x --max-memory",
		"why", "per-request buffers are short-lived and the live heap small: fewer collections, the memory limit still bounds the heap")
	return true
}
