package partition

import "sync/atomic"

// traffic counts what clients moved through a partition on this node, as
// Kafka's per-topic BytesInPerSec, MessagesInPerSec and BytesOutPerSec do:
// produced batches the partition accepted (on the node that served the
// Produce, not on raft followers applying it) and record bytes fetched
// from it. Atomics: any goroutine adds, scrapes read.
type traffic struct {
	bytesIn, recordsIn, bytesOut atomic.Int64
}

// CountProduced adds an accepted produce of bytes of batches holding
// records records.
func (p *Partition) CountProduced(bytes, records int) {
	p.traffic.bytesIn.Add(int64(bytes))
	p.traffic.recordsIn.Add(int64(records))
}

// CountFetched adds bytes of record batches put in a fetch response.
func (p *Partition) CountFetched(bytes int) { p.traffic.bytesOut.Add(int64(bytes)) }

// Traffic is what CountProduced and CountFetched added since the
// partition was opened on this node.
func (p *Partition) Traffic() (bytesIn, recordsIn, bytesOut int64) {
	return p.traffic.bytesIn.Load(), p.traffic.recordsIn.Load(), p.traffic.bytesOut.Load()
}
