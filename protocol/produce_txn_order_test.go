package protocol

import (
	"slices"
	"testing"
)

// TestRemoteTxnOrder: batches checked elsewhere go on in arrival order per
// partition and producer, whatever order their checks answer in; other
// keys are not held up.
func TestRemoteTxnOrder(t *testing.T) {
	var o remoteTxnOrder
	a, b := remoteTxnKey{"t", 0, 1}, remoteTxnKey{"t", 1, 1}
	var ran []string
	s1, s2, s3 := o.enqueue(a), o.enqueue(a), o.enqueue(a)
	other := o.enqueue(b)
	o.complete(a, s3, func() { ran = append(ran, "3") })
	o.complete(a, s2, func() { ran = append(ran, "2") })
	if len(ran) != 0 {
		t.Fatalf("ran %v before the first batch's check answered", ran)
	}
	o.complete(b, other, func() { ran = append(ran, "other") })
	o.complete(a, s1, func() { ran = append(ran, "1") })
	if want := []string{"other", "1", "2", "3"}; !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
	if len(o.queues) != 0 {
		t.Fatalf("queues left: %v", o.queues)
	}
}
