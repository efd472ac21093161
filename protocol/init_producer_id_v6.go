package protocol

// InitProducerId v6 (KIP-939, two-phase commit), which kmsg v1.15.1 does
// not know: v5's fields, then Enable2Pc and KeepPreparedTxn in the request
// and OngoingTxnProducerId and OngoingTxnProducerEpoch in the response.
// These types wrap kmsg's for every
// version (below 6 they are kmsg's encodings), so the handler has one
// request type.

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { requestTypes[22] = func() kmsg.Request { return new(initProducerIDRequest) } }

// initProducerIDRequest is InitProducerId at any served version.
type initProducerIDRequest struct {
	kmsg.InitProducerIDRequest
	// Enable2PC and KeepPreparedTxn are v6+ (false before).
	Enable2PC       bool
	KeepPreparedTxn bool
}

func (*initProducerIDRequest) MaxVersion() int16 { return 6 }

// ReadFrom decodes the body at the request's version.
func (r *initProducerIDRequest) ReadFrom(src []byte) error {
	if r.Version < 6 {
		return r.InitProducerIDRequest.ReadFrom(src)
	}
	b := kbin.Reader{Src: src}
	r.TransactionalID = b.CompactNullableString()
	r.TransactionTimeoutMillis = b.Int32()
	r.ProducerID = b.Int64()
	r.ProducerEpoch = b.Int16()
	r.Enable2PC = b.Bool()
	r.KeepPreparedTxn = b.Bool()
	skipTaggedFields(&b)
	return b.Complete()
}

// AppendTo encodes the body at the request's version.
func (r *initProducerIDRequest) AppendTo(dst []byte) []byte {
	if r.Version < 6 {
		return r.InitProducerIDRequest.AppendTo(dst)
	}
	dst = kbin.AppendCompactNullableString(dst, r.TransactionalID)
	dst = kbin.AppendInt32(dst, r.TransactionTimeoutMillis)
	dst = kbin.AppendInt64(dst, r.ProducerID)
	dst = kbin.AppendInt16(dst, r.ProducerEpoch)
	dst = kbin.AppendBool(dst, r.Enable2PC)
	dst = kbin.AppendBool(dst, r.KeepPreparedTxn)
	return kbin.AppendUvarint(dst, 0) // no tagged fields
}

// ResponseKind is the response, its ids -1 as Kafka's defaults.
func (r *initProducerIDRequest) ResponseKind() kmsg.Response {
	resp := &initProducerIDResponse{OngoingTxnProducerID: -1, OngoingTxnProducerEpoch: -1}
	resp.Default()
	resp.Version = r.Version
	resp.ProducerEpoch = -1
	return resp
}

// initProducerIDResponse is InitProducerId's response at any version.
type initProducerIDResponse struct {
	kmsg.InitProducerIDResponse
	// OngoingTxnProducerID and OngoingTxnProducerEpoch (v6+) name a
	// prepared transaction kept by KeepPreparedTxn; -1 when none (Regent
	// keeps none: it refuses KeepPreparedTxn).
	OngoingTxnProducerID    int64
	OngoingTxnProducerEpoch int16
}

func (*initProducerIDResponse) MaxVersion() int16 { return 6 }

// AppendTo encodes the body at the response's version.
func (v *initProducerIDResponse) AppendTo(dst []byte) []byte {
	if v.Version < 6 {
		return v.InitProducerIDResponse.AppendTo(dst)
	}
	dst = kbin.AppendInt32(dst, v.ThrottleMillis)
	dst = kbin.AppendInt16(dst, v.ErrorCode)
	dst = kbin.AppendInt64(dst, v.ProducerID)
	dst = kbin.AppendInt16(dst, v.ProducerEpoch)
	dst = kbin.AppendInt64(dst, v.OngoingTxnProducerID)
	dst = kbin.AppendInt16(dst, v.OngoingTxnProducerEpoch)
	return kbin.AppendUvarint(dst, 0)
}

// ReadFrom decodes a body at the response's version (tests, clients).
func (v *initProducerIDResponse) ReadFrom(src []byte) error {
	if v.Version < 6 {
		return v.InitProducerIDResponse.ReadFrom(src)
	}
	b := kbin.Reader{Src: src}
	v.ThrottleMillis = b.Int32()
	v.ErrorCode = b.Int16()
	v.ProducerID = b.Int64()
	v.ProducerEpoch = b.Int16()
	v.OngoingTxnProducerID = b.Int64()
	v.OngoingTxnProducerEpoch = b.Int16()
	skipTaggedFields(&b)
	return b.Complete()
}

// RequestKind is the request this answers.
func (v *initProducerIDResponse) RequestKind() kmsg.Request {
	r := new(initProducerIDRequest)
	r.Version = v.Version
	return r
}

// skipTaggedFields reads past a tagged-field section (no tags are known
// at these versions; Kafka ignores unknown ones).
func skipTaggedFields(b *kbin.Reader) {
	n := b.Uvarint()
	if uint64(n) > uint64(len(b.Src)) {
		// Each tag takes at least two bytes: a count past the end is
		// corrupt (and must not loop for long).
		b.Span(len(b.Src) + 1)
		return
	}
	for range n {
		b.Uvarint()
		b.Span(int(b.Uvarint()))
	}
}
