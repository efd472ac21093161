package topics

// Partition limits. A partition costs its node a directory, segment and
// index files, an actor and its state: 100,000 partitions created by one
// CreateTopics took a broker to 840 MB RSS and 100,000 directories, and
// without ACLs any client may create topics (CreateTopics, or a Metadata
// request that auto-creates). Two bounds hold that back:
//   - MaxPartitionsPerRequest: a CreateTopics or CreatePartitions request
//     that would add more partitions than this is refused whole with
//     POLICY_VIOLATION, as Kafka's controller refuses one over its batch
//     limit (the same 10,000), so tools that split large creations for
//     Kafka work unchanged;
//   - Options.MaxPartitions (--max-partitions): a creation that would take
//     the node's partitions over it is refused with POLICY_VIOLATION.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// MaxPartitionsPerRequest is the most partitions one CreateTopics or
// CreatePartitions request may add.
const MaxPartitionsPerRequest = 10_000

// ErrTooManyPartitionsPerRequest answers every topic of such a request.
func ErrTooManyPartitionsPerRequest(n int64) error {
	return errf(kerr.PolicyViolation, "this request adds %d partitions; at most %d may be added by one request (split it)", n, MaxPartitionsPerRequest)
}

// TotalPartitions is the number of partitions of all topics.
func (r *Registry) TotalPartitions() int {
	n := 0
	for _, t := range r.snapshot.Load().byName {
		n += len(t.Partitions)
	}
	return n
}

// checkRoom refuses adding n partitions over the node's bound.
func (r *Registry) checkRoom(n int32) error {
	if r.maxPartitions <= 0 {
		return nil
	}
	if held := r.TotalPartitions(); held+int(n) > r.maxPartitions {
		if r.refusedLog.Allow(10 * time.Second) {
			r.logger.Warn("partition bound reached: refusing topic creation and growth (POLICY_VIOLATION); raise --max-partitions or delete topics",
				"held", held, "limit", r.maxPartitions, "adding", n)
		}
		return errf(kerr.PolicyViolation, "the broker holds %d partitions and allows %d (--max-partitions): %d more do not fit", held, r.maxPartitions, n)
	}
	return nil
}

// Held is the number of partitions of all topics and the bound on them
// (0: none).
func (r *Registry) Held() (held, limit int) {
	return r.TotalPartitions(), r.maxPartitions
}
