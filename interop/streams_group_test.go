package interop_test

import (
	"strings"
	"testing"
	"time"
)

// TestStreamsGroupFailover: two instances of one Kafka Streams application
// in a KIP-1071 streams group (group.protocol=streams), exactly_once_v2. The
// broker splits the 12 tasks between them; when one instance leaves, the
// other gets every task; when it comes back (same state directory, so same
// process id), the tasks are split again. With the group config
// streams.num.standby.replicas=1, every counting (stateful) task has a
// standby on the process that does not run it while there are two, and
// none is left with one. The scenario checks each assignment through
// DescribeStreamsGroups and ListGroups, and the word counts through
// read_committed after each step.
func TestStreamsGroupFailover(t *testing.T) {
	frameworkScenarios(t)
	for _, guarantee := range []string{"exactly_once_v2"} {
		t.Run(guarantee, func(t *testing.T) {
			b := startFrameworkBroker(t)
			runScenario(t, "kafka", "StreamsGroupFailover", b.Addr, 5*time.Minute, guarantee)
			if !strings.Contains(b.LogTail(1<<20), "created streams group internal topic") {
				t.Errorf("the broker did not create the internal topics (no %q in its log)", "created streams group internal topic")
			}
		})
	}
}
