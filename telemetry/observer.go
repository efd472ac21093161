package telemetry

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/protocol"
)

// Span names: the request span is named after its operation (and topic,
// when it has one: "produce orders"); its children after their phase.
const (
	spanSocketRead   = "socket.read"
	spanDecode       = "request.decode"
	spanResponse     = "response.write"
	spanStorageRead  = "storage.read"
	spanFetchWait    = "fetch.wait"
	spanPartitionFmt = "partition." // + Work.Op
)

// Attribute keys outside the semantic conventions.
const (
	attrAPIKey        = attribute.Key("kafka.api.key")
	attrAPIVersion    = attribute.Key("kafka.api.version")
	attrCorrelationID = attribute.Key("kafka.correlation_id")
	attrAcks          = attribute.Key("kafka.produce.acks")
	attrErrorCode     = attribute.Key("kafka.error_code")
	attrResponseBytes = attribute.Key("kafka.response.size")
	attrRequestBytes  = attribute.Key("kafka.request.size")
	attrQueueWait     = attribute.Key("regent.actor.queue_wait_ns")
	attrReadBytes     = attribute.Key("regent.read.bytes")
	attrLinkedRecords = attribute.Key("regent.linked_records")
)

// apiInfo is what the observer precomputes for each API key.
type apiInfo struct {
	name   string             // "Produce"
	op     string             // "produce": messaging.operation.name and span name
	opType attribute.KeyValue // messaging.operation.type; Key "" when none fits
}

// observer implements protocol.Observer. tracer nil: no tracing; m nil:
// no metrics. Immutable after newObserver but for topicName.
type observer struct {
	tracer trace.Tracer
	ratio  float64 // share of requests traced, 0..1
	m      *metrics
	apis   [kmsg.MaxKey + 2]apiInfo // last: unknown keys
	// topicName resolves topic ids (nil: not set).
	topicName atomic.Pointer[func([16]byte) string]
	// replicator names the replicator in storage spans; set before
	// serving ("": local).
	replicator string
}

func (o *observer) replicatorName() string {
	if o.replicator == "" {
		return "local"
	}
	return o.replicator
}

// topic is a request's topic name, resolving its id when it has no name.
func (o *observer) topic(name string, id [16]byte) string {
	if name != "" || id == ([16]byte{}) {
		return name
	}
	if fn := o.topicName.Load(); fn != nil {
		return (*fn)(id)
	}
	return ""
}

var _ protocol.Observer = (*observer)(nil)

func newObserver(tracer trace.Tracer, m *metrics, ratio float64) *observer {
	if tracer == nil && m == nil {
		return nil
	}
	o := &observer{tracer: tracer, m: m, ratio: ratio}
	for k := range o.apis {
		name := "Unknown"
		if k <= kmsg.MaxKey {
			name = kmsg.NameForKey(int16(k))
		}
		info := apiInfo{name: name, op: strings.ToLower(name)}
		switch k {
		case 0: // Produce
			info.opType = semconv.MessagingOperationTypeSend
		case 1: // Fetch
			info.opType = semconv.MessagingOperationTypeReceive
		case 8, 28: // OffsetCommit, TxnOffsetCommit
			info.opType = semconv.MessagingOperationTypeSettle
		}
		o.apis[k] = info
	}
	return o
}

func (o *observer) api(key int16) *apiInfo {
	if key < 0 || int(key) > kmsg.MaxKey {
		return &o.apis[len(o.apis)-1]
	}
	return &o.apis[key]
}

// sample draws whether a request is traced.
func (o *observer) sample() bool {
	switch {
	case o.ratio >= 1:
		return true
	case o.ratio <= 0:
		return false
	}
	return rand.Float64() < o.ratio
}

// RequestStart implements protocol.Observer. It starts the request span
// (back-dated to the first byte read) with its socket-read and decode
// children, and counts the request's bytes.
func (o *observer) RequestStart(r *protocol.Request, read, framed, decoded time.Time, frameBytes int) protocol.RequestTrace {
	if o.m != nil {
		o.m.api(r.Key).received.Add(int64(frameBytes))
	}
	if o.tracer == nil || !o.sample() {
		if o.m == nil {
			return nil
		}
		return &requestTrace{o: o, key: r.Key, start: read}
	}
	info := o.api(r.Key)
	ctx, span := o.tracer.Start(context.Background(), info.op, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(read))
	if !span.IsRecording() {
		if o.m == nil {
			return nil
		}
		return &requestTrace{o: o, key: r.Key, start: read}
	}
	t := &requestTrace{o: o, key: r.Key, start: read, span: span, ctx: ctx}
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs,
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationName(info.op),
		semconv.RPCSystemNameKey.String("kafka"),
		semconv.RPCMethod(info.name),
		attrAPIKey.Int(int(r.Key)),
		attrAPIVersion.Int(int(r.Version)),
		attrCorrelationID.Int(int(r.CorrelationID)),
		attrRequestBytes.Int(frameBytes),
	)
	if info.opType.Key != "" {
		attrs = append(attrs, info.opType)
	}
	if r.ClientID != "" {
		attrs = append(attrs, semconv.MessagingClientID(r.ClientID))
	}
	if r.Conn != nil {
		if host, port, err := net.SplitHostPort(r.Conn.RemoteAddr); err == nil {
			attrs = append(attrs, semconv.NetworkPeerAddress(host))
			if p, err := strconv.Atoi(port); err == nil {
				attrs = append(attrs, semconv.NetworkPeerPort(p))
			}
		}
	}
	topic := ""
	switch m := r.Msg.(type) {
	case *kmsg.ProduceRequest:
		attrs = append(attrs, attrAcks.Int(int(m.Acks)))
		if len(m.Topics) == 1 {
			topic = o.topic(m.Topics[0].Topic, m.Topics[0].TopicID)
			if len(m.Topics[0].Partitions) == 1 {
				attrs = append(attrs, semconv.MessagingDestinationPartitionID(strconv.Itoa(int(m.Topics[0].Partitions[0].Partition))))
			}
		}
	case *kmsg.FetchRequest:
		if len(m.Topics) == 1 {
			topic = o.topic(m.Topics[0].Topic, m.Topics[0].TopicID)
		}
	}
	if topic != "" {
		attrs = append(attrs, semconv.MessagingDestinationName(topic))
		span.SetName(info.op + " " + topic)
	}
	span.SetAttributes(attrs...)
	_, s := o.tracer.Start(ctx, spanSocketRead, trace.WithTimestamp(read))
	s.End(trace.WithTimestamp(framed))
	_, s = o.tracer.Start(ctx, spanDecode, trace.WithTimestamp(framed))
	s.End(trace.WithTimestamp(decoded))
	return t
}

// requestTrace implements protocol.RequestTrace. span is nil when the
// request is not sampled (it is then followed for metrics only). Fields
// other than responded are immutable; responded (zero: no response, as
// acks=0) is written by Responded and read by Written, which the
// connection's write ordering puts after it.
type requestTrace struct {
	o         *observer
	key       int16
	start     time.Time
	span      trace.Span
	ctx       context.Context
	responded time.Time
}

func (t *requestTrace) Recording() bool { return t.span != nil }

func (t *requestTrace) Context() context.Context {
	if t.ctx == nil {
		return context.Background()
	}
	return t.ctx
}

// Work implements partition.Tracer: the actor's span, linked to the
// producers' trace contexts found in uncompressed record headers.
func (t *requestTrace) Work(w partition.Work) partition.WorkTrace {
	if t.span == nil {
		return nil
	}
	now := time.Now()
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKafka,
		semconv.MessagingDestinationName(w.Topic),
		semconv.MessagingDestinationPartitionID(strconv.Itoa(int(w.Partition))),
	}
	if !w.Sent.IsZero() {
		attrs = append(attrs, attrQueueWait.Int64(now.Sub(w.Sent).Nanoseconds()))
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(now)}
	if w.Records != nil {
		links, count, linked := recordLinks(w.Records)
		attrs = append(attrs, semconv.MessagingBatchMessageCount(count))
		if linked > 0 {
			attrs = append(attrs, attrLinkedRecords.Int(linked))
			opts = append(opts, trace.WithLinks(links...))
		}
	}
	opts = append(opts, trace.WithAttributes(attrs...))
	ctx, span := t.o.tracer.Start(t.ctx, spanPartitionFmt+w.Op, opts...)
	storage := "storage.append"
	if w.Op != "produce" {
		storage = "storage." + w.Op
	}
	return &workTrace{t: t, ctx: ctx, span: span, storageName: storage}
}

// Read implements protocol.RequestTrace: one storage read of a fetch.
func (t *requestTrace) Read(topic string, part int32, offset int64, n int, start time.Time, err error) {
	if t.span == nil {
		return
	}
	_, s := t.o.tracer.Start(t.ctx, spanStorageRead, trace.WithTimestamp(start), trace.WithAttributes(
		semconv.MessagingDestinationName(topic),
		semconv.MessagingDestinationPartitionID(strconv.Itoa(int(part))),
		semconv.MessagingKafkaOffset(int(offset)),
		attrReadBytes.Int(n),
	))
	if err != nil {
		s.SetStatus(codes.Error, err.Error())
	}
	s.End()
}

// Waited implements protocol.RequestTrace: a fetch's long-poll wait.
func (t *requestTrace) Waited(start time.Time) {
	if t.span == nil {
		return
	}
	_, s := t.o.tracer.Start(t.ctx, spanFetchWait, trace.WithTimestamp(start))
	s.End()
}

// Responded implements protocol.RequestTrace.
func (t *requestTrace) Responded(size int) {
	if t.o.m != nil && size > 0 {
		t.o.m.api(t.key).sent.Add(int64(size))
	}
	if t.span != nil && size > 0 {
		t.responded = time.Now()
		t.span.SetAttributes(attrResponseBytes.Int(size))
	}
}

// Written implements protocol.RequestTrace: it ends the request, recording
// its latency and, when sampled, the response-write span and the request
// span. Called on the event loop.
func (t *requestTrace) Written(err error) {
	now := time.Now()
	if m := t.o.m; m != nil {
		api := m.api(t.key)
		api.requests.Add(1)
		m.duration.Record(context.Background(), now.Sub(t.start).Seconds(), api.record...)
	}
	if t.span == nil {
		return
	}
	if !t.responded.IsZero() {
		_, s := t.o.tracer.Start(t.ctx, spanResponse, trace.WithTimestamp(t.responded))
		if err != nil {
			s.SetStatus(codes.Error, err.Error())
		}
		s.End(trace.WithTimestamp(now))
	}
	if err != nil {
		t.span.SetStatus(codes.Error, "response not written: "+err.Error())
	}
	t.span.End(trace.WithTimestamp(now))
}

// workTrace implements partition.WorkTrace; owned by one actor goroutine.
type workTrace struct {
	t           *requestTrace
	ctx         context.Context
	span        trace.Span
	storage     trace.Span
	storageCtx  context.Context
	storageName string
}

func (w *workTrace) StorageStart() {
	w.storageCtx, w.storage = w.t.o.tracer.Start(w.ctx, w.storageName, trace.WithAttributes(attrReplicator.String(w.t.o.replicatorName())))
}

// TraceParent is the storage span's W3C traceparent: the raft replicator
// carries it so each node's apply joins this trace.
func (w *workTrace) TraceParent() string {
	if w.storageCtx == nil {
		return ""
	}
	return traceParent(w.storageCtx)
}

func (w *workTrace) StorageDone() {
	if w.storage != nil {
		w.storage.End()
	}
}

func (w *workTrace) Done(baseOffset int64, err error) {
	if baseOffset >= 0 {
		w.span.SetAttributes(semconv.MessagingKafkaOffset(int(baseOffset)))
	}
	if err != nil {
		setError(w.span, err)
	}
	w.span.End()
}

// setError marks a span failed with Kafka's error name and code.
func setError(s trace.Span, err error) {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		s.SetAttributes(semconv.ErrorTypeKey.String(ke.Message), attrErrorCode.Int(int(ke.Code)))
		s.SetStatus(codes.Error, ke.Message)
		return
	}
	s.SetAttributes(semconv.ErrorTypeOther)
	s.SetStatus(codes.Error, err.Error())
}
