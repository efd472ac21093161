package protocol

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A reassignment target is accepted only as the voters themselves.
func TestReassignmentRefusal(t *testing.T) {
	voters := []int32{1, 2, 3}
	for _, tc := range []struct {
		target []int32
		want   error
	}{
		{[]int32{3, 1, 2}, nil},
		{[]int32{1, 2, 3}, nil},
		{nil, kerr.NoReassignmentInProgress},
		{[]int32{}, kerr.InvalidReplicaAssignment},
		{[]int32{1, 2}, kerr.InvalidReplicaAssignment},
		{[]int32{1, 2, 2}, kerr.InvalidReplicaAssignment},
		{[]int32{1, 2, 3, 4}, kerr.InvalidReplicaAssignment},
		{[]int32{1, 2, 4}, kerr.InvalidReplicaAssignment},
	} {
		err := reassignmentRefusal(tc.target, voters)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("target %v: %v, want %v", tc.target, err, tc.want)
		}
	}
}
