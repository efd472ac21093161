package protocol

import "sync"

// remoteTxnOrder keeps the transactional batches a partition group's
// leader checks with a coordinator on another node in the order they
// arrived, per partition and producer: the checks run at once, but a
// batch goes to the partition only after every earlier one of its
// producer there was appended or refused. Without it a later request's
// check could finish first and its batch land ahead of an earlier one
// (OUT_OF_ORDER_SEQUENCE_NUMBER for the earlier). Its zero value is ready.
type remoteTxnOrder struct {
	mu     sync.Mutex
	queues map[remoteTxnKey][]*remoteTxnSlot // under mu; a key's FIFO, dropped when empty
}

type remoteTxnKey struct {
	topic string
	part  int32
	pid   int64
}

// remoteTxnSlot is one batch's place in its queue: then is set once its
// check answered.
type remoteTxnSlot struct {
	then func()
}

// enqueue takes the next place in k's queue; called in arrival order.
func (o *remoteTxnOrder) enqueue(k remoteTxnKey) *remoteTxnSlot {
	s := &remoteTxnSlot{}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.queues == nil {
		o.queues = map[remoteTxnKey][]*remoteTxnSlot{}
	}
	o.queues[k] = append(o.queues[k], s)
	return s
}

// complete records what s does once its turn comes (append or refuse;
// it must not block), and runs every ready slot at the queue's head, in
// order.
func (o *remoteTxnOrder) complete(k remoteTxnKey, s *remoteTxnSlot, then func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s.then = then
	q := o.queues[k]
	for len(q) > 0 && q[0].then != nil {
		q[0].then()
		q[0] = nil
		q = q[1:]
	}
	if len(q) == 0 {
		delete(o.queues, k)
		return
	}
	o.queues[k] = q
}
