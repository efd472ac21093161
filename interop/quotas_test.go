package interop_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
)

// Client quotas (issue 15): DescribeClientQuotas and AlterClientQuotas
// as Kafka serves them, and produce throttling with Kafka's rate math.

func qstr(s string) *string { return &s }

// quotaEntity builds an AlterClientQuotas entity: pairs of type and name
// ("" name: the default).
func quotaEntity(kv ...string) []kmsg.AlterClientQuotasRequestEntryEntity {
	var out []kmsg.AlterClientQuotasRequestEntryEntity
	for i := 0; i+1 < len(kv); i += 2 {
		e := kmsg.NewAlterClientQuotasRequestEntryEntity()
		e.Type = kv[i]
		if kv[i+1] != "" {
			e.Name = qstr(kv[i+1])
		}
		out = append(out, e)
	}
	return out
}

type quotaOp struct {
	key    string
	value  float64
	remove bool
}

func alterQuotas(t *testing.T, ctx context.Context, cl *kgo.Client, validateOnly bool, entries ...kmsg.AlterClientQuotasRequestEntry) *kmsg.AlterClientQuotasResponse {
	t.Helper()
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries, req.ValidateOnly = entries, validateOnly
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Entries) != len(entries) {
		t.Fatalf("%d entries answered for %d", len(resp.Entries), len(entries))
	}
	return resp
}

func quotaEntry(ent []kmsg.AlterClientQuotasRequestEntryEntity, ops ...quotaOp) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	e.Entity = ent
	for _, o := range ops {
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value, op.Remove = o.key, o.value, o.remove
		e.Ops = append(e.Ops, op)
	}
	return e
}

// describeQuotas returns the matched entities as "type=name,..." (name
// <default> for defaults) mapped to "key=value,..." sorted, or the error.
func describeQuotas(t *testing.T, ctx context.Context, cl *kgo.Client, strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) (map[string]string, error) {
	t.Helper()
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Components, req.Strict = comps, strict
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		return nil, fmt.Errorf("%w: %s", err, msg)
	}
	out := map[string]string{}
	for _, e := range resp.Entries {
		var ent, vals []string
		for _, p := range e.Entity {
			n := "<default>"
			if p.Name != nil {
				n = *p.Name
			}
			ent = append(ent, p.Type+"="+n)
		}
		for _, v := range e.Values {
			vals = append(vals, fmt.Sprintf("%s=%g", v.Key, v.Value))
		}
		sort.Strings(vals)
		out[strings.Join(ent, ",")] = strings.Join(vals, ",")
	}
	return out, nil
}

func quotaComp(typ string, match kmsg.QuotasMatchType, name *string) kmsg.DescribeClientQuotasRequestComponent {
	c := kmsg.NewDescribeClientQuotasRequestComponent()
	c.EntityType, c.MatchType, c.Match = typ, match, name
	return c
}

// TestClientQuotasAPI: AlterClientQuotas validates as Kafka's controller,
// honours validate_only and removals; DescribeClientQuotas filters by
// exact name, default and any, strictly or not; the quotas survive a
// restart.
func TestClientQuotasAPI(t *testing.T) {
	b, ctx, cl := quotaBroker(t)

	// Refusals, each alone: the valid entry beside them is applied.
	resp := alterQuotas(t, ctx, cl, false,
		quotaEntry(quotaEntity("client-id", "app"), quotaOp{key: "producer_byte_rate", value: 1048576}, quotaOp{key: "consumer_byte_rate", value: 2097152}),
		quotaEntry(quotaEntity("client-id", "x"), quotaOp{key: "producer_byte_rate", value: 10.5}),
		quotaEntry(quotaEntity("client-id", "x"), quotaOp{key: "producer_byte_rate", value: 0}),
		quotaEntry(quotaEntity("client-id", "x"), quotaOp{key: "bogus", value: 1}),
		quotaEntry(quotaEntity("user", "u", "user", "v"), quotaOp{key: "producer_byte_rate", value: 1}),
		quotaEntry(quotaEntity("ip", "127.0.0.1"), quotaOp{key: "producer_byte_rate", value: 1}),
		quotaEntry(quotaEntity("group", "g"), quotaOp{key: "producer_byte_rate", value: 1}),
	)
	wantCodes := []int16{0, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.UnsupportedVersion.Code}
	for i, e := range resp.Entries {
		msg := ""
		if e.ErrorMessage != nil {
			msg = *e.ErrorMessage
		}
		if e.ErrorCode != wantCodes[i] {
			t.Errorf("entry %d: code %d (%s), want %d", i, e.ErrorCode, msg, wantCodes[i])
		}
		if e.ErrorCode != 0 && msg == "" {
			t.Errorf("entry %d: no message", i)
		}
		t.Logf("entry %d: %d %s", i, e.ErrorCode, msg)
	}
	// validate_only changes nothing.
	resp = alterQuotas(t, ctx, cl, true, quotaEntry(quotaEntity("user", "alice"), quotaOp{key: "consumer_byte_rate", value: 4096}))
	if resp.Entries[0].ErrorCode != 0 {
		t.Fatalf("validate_only: %d", resp.Entries[0].ErrorCode)
	}
	alterQuotas(t, ctx, cl, false,
		quotaEntry(quotaEntity("user", "alice", "client-id", "app"), quotaOp{key: "producer_byte_rate", value: 1024}),
		quotaEntry(quotaEntity("user", ""), quotaOp{key: "producer_byte_rate", value: 2048}, quotaOp{key: "request_percentage", value: 12.5}),
		quotaEntry(quotaEntity("user", "", "client-id", ""), quotaOp{key: "consumer_byte_rate", value: 3072}),
		quotaEntry(quotaEntity("client-id", ""), quotaOp{key: "producer_byte_rate", value: 5000}),
	)

	all := map[string]string{
		"client-id=app":                      "consumer_byte_rate=2.097152e+06,producer_byte_rate=1.048576e+06",
		"user=alice,client-id=app":           "producer_byte_rate=1024",
		"user=<default>":                     "producer_byte_rate=2048,request_percentage=12.5",
		"user=<default>,client-id=<default>": "consumer_byte_rate=3072",
		"client-id=<default>":                "producer_byte_rate=5000",
	}
	check := func(what string, strict bool, want []string, comps ...kmsg.DescribeClientQuotasRequestComponent) {
		t.Helper()
		got, err := describeQuotas(t, ctx, cl, strict, comps...)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
		for _, w := range want {
			if got[w] != all[w] {
				t.Fatalf("%s: %s = %q, want %q (all %v)", what, w, got[w], all[w], got)
			}
		}
	}
	check("everything", false, []string{"client-id=app", "user=alice,client-id=app", "user=<default>", "user=<default>,client-id=<default>", "client-id=<default>"})
	check("client app", false, []string{"client-id=app", "user=alice,client-id=app"}, quotaComp("client-id", kmsg.QuotasMatchTypeExact, qstr("app")))
	check("client app strict", true, []string{"client-id=app"}, quotaComp("client-id", kmsg.QuotasMatchTypeExact, qstr("app")))
	check("default users", false, []string{"user=<default>", "user=<default>,client-id=<default>"}, quotaComp("user", kmsg.QuotasMatchTypeDefault, nil))
	check("any user strict", true, []string{"user=<default>"}, quotaComp("user", kmsg.QuotasMatchTypeAny, nil))
	check("any user, default client", true, []string{"user=<default>,client-id=<default>"}, quotaComp("user", kmsg.QuotasMatchTypeAny, nil), quotaComp("client-id", kmsg.QuotasMatchTypeDefault, nil))
	check("validate_only left no alice quota", true, nil, quotaComp("user", kmsg.QuotasMatchTypeExact, qstr("alice")))
	for what, comps := range map[string][]kmsg.DescribeClientQuotasRequestComponent{
		"exact without a name": {quotaComp("user", kmsg.QuotasMatchTypeExact, nil)},
		"default with a name":  {quotaComp("user", kmsg.QuotasMatchTypeDefault, qstr("x"))},
		"user twice":           {quotaComp("user", kmsg.QuotasMatchTypeAny, nil), quotaComp("user", kmsg.QuotasMatchTypeAny, nil)},
		"ip beside user":       {quotaComp("ip", kmsg.QuotasMatchTypeAny, nil), quotaComp("user", kmsg.QuotasMatchTypeAny, nil)},
	} {
		if _, err := describeQuotas(t, ctx, cl, false, comps...); err == nil || !strings.Contains(err.Error(), "INVALID_REQUEST") {
			t.Errorf("%s: %v, want INVALID_REQUEST", what, err)
		}
	}

	// Removing keys: an entity with none left is gone.
	alterQuotas(t, ctx, cl, false, quotaEntry(quotaEntity("client-id", "app"), quotaOp{key: "consumer_byte_rate", remove: true}),
		quotaEntry(quotaEntity("client-id", ""), quotaOp{key: "producer_byte_rate", remove: true}))
	all["client-id=app"] = "producer_byte_rate=1.048576e+06"
	check("after removals", false, []string{"client-id=app", "user=alice,client-id=app", "user=<default>", "user=<default>,client-id=<default>"})

	// Kept over a restart.
	b.Restart()
	cl2, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	cl = cl2
	check("after a restart", false, []string{"client-id=app", "user=alice,client-id=app", "user=<default>", "user=<default>,client-id=<default>"})
}

// rawConn speaks Kafka's framing on one connection, so the test sees the
// broker's own throttling (kgo would hold its next request itself).
type rawConn struct {
	c        net.Conn
	clientID string
	corr     int32
}

func dialRaw(t *testing.T, addr, clientID string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{c: c, clientID: clientID}
}

// send writes req (request header v1, or v2 for a flexible version) and
// returns the response and when it arrived.
func (r *rawConn) send(req kmsg.Request, deadline time.Time) (kmsg.Response, time.Time, error) {
	r.corr++
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(r.corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.clientID)))
	b = append(b, r.clientID...)
	if req.IsFlexible() {
		b = append(b, 0) // no header tags
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	_ = r.c.SetDeadline(deadline)
	if _, err := r.c.Write(b); err != nil {
		return nil, time.Time{}, err
	}
	var lb [8]byte
	if _, err := io.ReadFull(r.c, lb[:]); err != nil {
		return nil, time.Time{}, err
	}
	at := time.Now()
	body := make([]byte, binary.BigEndian.Uint32(lb[:4])-4)
	if _, err := io.ReadFull(r.c, body); err != nil {
		return nil, at, err
	}
	if got := int32(binary.BigEndian.Uint32(lb[4:])); got != r.corr {
		return nil, at, fmt.Errorf("correlation id %d, want %d", got, r.corr)
	}
	if req.IsFlexible() && req.Key() != 18 && len(body) > 0 {
		body = body[1:] // response header v1's tags (none); ApiVersions answers header v0
	}
	resp := req.ResponseKind()
	return resp, at, resp.ReadFrom(body)
}

// rawProduce is a Produce v7 of n bytes of records for a topic that does
// not exist: Kafka counts a request's bytes whatever its partitions
// answer, and so does Regent.
func rawProduce(n int) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 7, 1, 5000
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "no-such-topic-for-quotas"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = bytes.Repeat([]byte{1}, n)
	tp.Partitions = append(tp.Partitions, p)
	req.Topics = append(req.Topics, tp)
	return req
}

// TestClientQuotaMutesConnection: a produce past its client's quota is
// answered at once with Kafka's throttle time ((observed-quota)/quota *
// window: 122880 bytes over the 10 s a fresh sensor measures against
// 10240 B/s is 2 s), and the connection reads nothing more for that long
// (KIP-219); another client's connection is answered meanwhile.
func TestClientQuotaMutesConnection(t *testing.T) {
	b, ctx, cl := quotaBroker(t)
	if e := alterQuotas(t, ctx, cl, false, quotaEntry(quotaEntity("client-id", "muted"), quotaOp{key: "producer_byte_rate", value: 10240})).Entries[0]; e.ErrorCode != 0 {
		t.Fatalf("alter: %d", e.ErrorCode)
	}
	deadline := time.Now().Add(30 * time.Second)
	muted := dialRaw(t, b.Addr, "muted")
	other := dialRaw(t, b.Addr, "other")
	resp, at, err := muted.send(rawProduce(120<<10), deadline)
	if err != nil {
		t.Fatal(err)
	}
	th := time.Duration(resp.(*kmsg.ProduceResponse).ThrottleMillis) * time.Millisecond
	if th < 1900*time.Millisecond || th > 2100*time.Millisecond {
		t.Fatalf("throttle %v, want 2 s", th)
	}
	// The other client: no quota, answered at once, never throttled.
	oresp, _, err := other.send(rawProduce(120<<10), deadline)
	if err != nil {
		t.Fatal(err)
	}
	if ms := oresp.(*kmsg.ProduceResponse).ThrottleMillis; ms != 0 {
		t.Fatalf("unlimited client throttled %d ms", ms)
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 0
	if _, _, err := other.send(av, deadline); err != nil {
		t.Fatal(err)
	}
	// The muted connection's next request waits out the throttle.
	av = kmsg.NewPtrApiVersionsRequest()
	av.Version = 0
	_, next, err := muted.send(av, deadline)
	if err != nil {
		t.Fatal(err)
	}
	if waited := next.Sub(at); waited < th-50*time.Millisecond {
		t.Fatalf("next request answered %v after a %v throttle", waited, th)
	} else {
		t.Logf("throttle %v; the muted connection's next answer came %v later", th, waited)
	}
}

// TestClientQuotaThrottlesFetch: a fetch response past the client's
// consumer_byte_rate carries Kafka's throttle time for its bytes, and the
// connection is muted for it; another client id fetching the same bytes
// is not throttled.
func TestClientQuotaThrottlesFetch(t *testing.T) {
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic("quota-fetch"), kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// 1.5 MiB of records in one partition.
	value := bytes.Repeat([]byte("q"), 1024)
	for i := 0; i < 1536; i++ {
		cl.Produce(ctx, &kgo.Record{Value: value, Partition: 0}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	const quota = 131072
	if e := alterQuotas(t, ctx, cl, false, quotaEntry(quotaEntity("client-id", "slow-consumer"), quotaOp{key: "consumer_byte_rate", value: quota})).Entries[0]; e.ErrorCode != 0 {
		t.Fatalf("alter: %d", e.ErrorCode)
	}
	fetch := func(offset int64) *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 4, -1, 0, 1, 4<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "quota-fetch"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, offset, 4<<20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		return req
	}
	// Fetch on until a response is throttled: Kafka's math over the 10 s
	// a fresh sensor measures gives the throttle for the bytes so far (a
	// little more than their records: each response's own fields).
	deadline := time.Now().Add(30 * time.Second)
	slow := dialRaw(t, b.Addr, "slow-consumer")
	var (
		offset int64
		total  int
		th     float64
		at     time.Time
	)
	for th == 0 {
		if total > 1536<<10 {
			t.Fatalf("fetched all %d bytes without a throttle", total)
		}
		resp, when, err := slow.send(fetch(offset), deadline)
		if err != nil {
			t.Fatal(err)
		}
		fr := resp.(*kmsg.FetchResponse)
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 || fr.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("fetch: %+v", fr)
		}
		recs := fr.Topics[0].Partitions[0].RecordBatches
		total += len(recs)
		for len(recs) >= 27 {
			base := int64(binary.BigEndian.Uint64(recs))
			n := int(binary.BigEndian.Uint32(recs[8:]))
			offset = base + int64(binary.BigEndian.Uint32(recs[23:])) + 1
			recs = recs[min(12+n, len(recs)):]
		}
		th, at = float64(fr.ThrottleMillis), when
	}
	want := (float64(total)/10/quota - 1) * 10 * 1000
	if th < want || th > want+200 {
		t.Fatalf("fetched %d bytes, throttle %v ms, want about %.0f ms", total, th, want)
	}
	other := dialRaw(t, b.Addr, "fast-consumer")
	oresp, _, err := other.send(fetch(0), deadline)
	if err != nil {
		t.Fatal(err)
	}
	if ms := oresp.(*kmsg.FetchResponse).ThrottleMillis; ms != 0 {
		t.Fatalf("unlimited consumer throttled %d ms", ms)
	}
	waitedOut(t, slow, int32(th), at, deadline)
	t.Logf("fetched %d bytes: throttle %v ms (Kafka's math %.0f ms for the records alone)", total, th, want)
}

// TestRequestQuotaThrottles: a client whose requests take more of the
// broker's handling time than its request_percentage quota is answered
// with a throttle time, at most one quota window (1 s) as in Kafka, and
// its connection reads nothing more for that long; a client with another
// client id, sending the same requests beside it, is never throttled.
func TestRequestQuotaThrottles(t *testing.T) {
	b, ctx, cl := quotaBroker(t)
	// 0.1% of a thread: 10 ms of handling over the 10 s a fresh sensor
	// measures against, a few hundred Metadata requests.
	if e := alterQuotas(t, ctx, cl, false, quotaEntry(quotaEntity("client-id", "busy"), quotaOp{key: "request_percentage", value: 0.1})).Entries[0]; e.ErrorCode != 0 {
		t.Fatalf("alter: %d", e.ErrorCode)
	}
	metadata := func() *kmsg.MetadataRequest {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 7 // all topics; throttle_time_ms since v3
		return req
	}
	deadline := time.Now().Add(40 * time.Second)
	busy := dialRaw(t, b.Addr, "busy")
	other := dialRaw(t, b.Addr, "other")
	var (
		first, th, sent int
		at              time.Time
	)
	for th < 1000 {
		if sent++; sent > 20000 {
			t.Fatalf("%d requests, last throttle %d ms: never reached the 1 s bound", sent, th)
		}
		resp, when, err := busy.send(metadata(), deadline)
		if err != nil {
			t.Fatal(err)
		}
		th, at = int(resp.(*kmsg.MetadataResponse).ThrottleMillis), when
		if th > 1000 {
			t.Fatalf("throttle %d ms: Kafka bounds a request quota's throttle at one window (1000 ms)", th)
		}
		if th > 0 && first == 0 {
			first = sent
		}
		oresp, _, err := other.send(metadata(), deadline)
		if err != nil {
			t.Fatal(err)
		}
		if ms := oresp.(*kmsg.MetadataResponse).ThrottleMillis; ms != 0 {
			t.Fatalf("a client without a quota throttled %d ms", ms)
		}
	}
	// The throttled connection's next request waits out the throttle.
	waited := waitedOut(t, busy, int32(th), at, deadline)
	t.Logf("first throttle after %d requests, 1 s after %d; the next answer came %v later", first, sent, waited)
}

// TestControllerMutationQuota: controller_mutation_rate as Kafka's token
// bucket (see overMutationQuota for the first request). While the bucket
// is negative, DeleteTopics v5 and CreatePartitions v3 of the same client
// are refused too (on any of its connections); CreateTopics v5 (before
// THROTTLING_QUOTA_EXCEEDED) is served and reports the throttle. The
// throttled connection waits its throttle out, another client id is not
// limited, and a refused topic is not created.
func TestControllerMutationQuota(t *testing.T) {
	b, ctx, cl := quotaBroker(t)
	if e := alterQuotas(t, ctx, cl, false, quotaEntry(quotaEntity("client-id", "admin"), quotaOp{key: "controller_mutation_rate", value: 10})).Entries[0]; e.ErrorCode != 0 {
		t.Fatalf("alter: %d", e.ErrorCode)
	}
	deadline := time.Now().Add(40 * time.Second)
	admin := dialRaw(t, b.Addr, "admin")
	th, at := overMutationQuota(t, admin, "mq", deadline)

	// The same client on another connection: still over its quota.
	admin2 := dialRaw(t, b.Addr, "admin")
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version, del.TimeoutMillis, del.TopicNames = 5, 30000, []string{"mq-b"}
	dresp, _, err := admin2.send(del, deadline)
	if err != nil {
		t.Fatal(err)
	}
	if dr := dresp.(*kmsg.DeleteTopicsResponse); len(dr.Topics) != 1 || dr.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || dr.ThrottleMillis <= 0 {
		t.Fatalf("DeleteTopics v5 over the quota: %+v", dr)
	}
	admin3 := dialRaw(t, b.Addr, "admin")
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version, cp.TimeoutMillis = 3, 30000
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "mq-b", 25
	cp.Topics = append(cp.Topics, cpt)
	presp, _, err := admin3.send(cp, deadline)
	if err != nil {
		t.Fatal(err)
	}
	if pr := presp.(*kmsg.CreatePartitionsResponse); len(pr.Topics) != 1 || pr.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || pr.ThrottleMillis <= 0 {
		t.Fatalf("CreatePartitions v3 over the quota: %+v", pr)
	}
	// Permissive before v6: served, with the throttle (now -15 tokens).
	admin4 := dialRaw(t, b.Addr, "admin")
	resp, at5, err := admin4.send(createTopicsRequest(5, "mq-d", 5), deadline)
	if err != nil {
		t.Fatal(err)
	}
	cr5 := resp.(*kmsg.CreateTopicsResponse)
	if len(cr5.Topics) != 1 || cr5.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics v5: %+v, want mq-d created", cr5.Topics)
	}
	// The bucket refilled since the first throttle was given, and lost
	// 5 tokens (500 ms at 10/s).
	want := time.Duration(th)*time.Millisecond + 500*time.Millisecond - at5.Sub(at)
	if got := time.Duration(cr5.ThrottleMillis) * time.Millisecond; got < want-100*time.Millisecond || got > want+100*time.Millisecond {
		t.Fatalf("CreateTopics v5: throttle %v, want about %v", got, want)
	}

	// Another client id has no quota.
	other := dialRaw(t, b.Addr, "other")
	resp, _, err = other.send(createTopicsRequest(6, "mq-other", 200), deadline)
	if err != nil {
		t.Fatal(err)
	}
	if cr := resp.(*kmsg.CreateTopicsResponse); cr.Topics[0].ErrorCode != 0 || cr.ThrottleMillis != 0 {
		t.Fatalf("a client without a quota: %+v", cr)
	}
	waitedOut(t, admin, th, at, deadline)
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"mq-a": 100, "mq-b": 20, "mq-d": 5, "mq-other": 200, "mq-c": 0} {
		if got := len(topics[name].Partitions); got != want {
			t.Errorf("%s has %d partitions, want %d", name, got, want)
		}
	}
}

// createTopicsRequest asks for topics given as name, partitions pairs.
func createTopicsRequest(version int16, nameParts ...any) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = version, 30000
	for i := 0; i+1 < len(nameParts); i += 2 {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = nameParts[i].(string), int32(nameParts[i+1].(int)), -1
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// overMutationQuota takes a fresh client with a controller_mutation_rate
// of 10 partitions/s over it: the bucket holds a burst of 110 (11 windows
// of 1 s), so a CreateTopics v6 of PREFIX-a, -b and -c with 100, 20 and 1
// partitions creates the first two, taking it to -10, and refuses the
// third with THROTTLING_QUOTA_EXCEEDED and the time the bucket needs to
// refill to zero: 1 s, less what it refilled while the first two were
// created (a few hundred ms for 120 partitions, at times). It returns that
// throttle (ms) and when it came.
func overMutationQuota(t *testing.T, conn *rawConn, prefix string, deadline time.Time) (int32, time.Time) {
	t.Helper()
	sent := time.Now()
	resp, at, err := conn.send(createTopicsRequest(6, prefix+"-a", 100, prefix+"-b", 20, prefix+"-c", 1), deadline)
	if err != nil {
		t.Fatal(err)
	}
	cr := resp.(*kmsg.CreateTopicsResponse)
	codes := map[string]int16{}
	for _, rt := range cr.Topics {
		codes[rt.Topic] = rt.ErrorCode
	}
	if codes[prefix+"-a"] != 0 || codes[prefix+"-b"] != 0 || codes[prefix+"-c"] != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("CreateTopics v6 codes %v, want %s-a and -b created, -c THROTTLING_QUOTA_EXCEEDED", codes, prefix)
	}
	th := time.Duration(cr.ThrottleMillis) * time.Millisecond
	if least := time.Second - at.Sub(sent) - 50*time.Millisecond; th < least || th > time.Second+50*time.Millisecond {
		t.Fatalf("CreateTopics v6 answered in %v: throttle %v, want 1 s less that", at.Sub(sent), th)
	}
	return cr.ThrottleMillis, at
}

// waitedOut checks that conn, throttled for th ms by a response at at,
// answers its next request only once the throttle is over; it returns
// how long after at the answer came.
func waitedOut(t *testing.T, conn *rawConn, th int32, at, deadline time.Time) time.Duration {
	t.Helper()
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 0
	_, next, err := conn.send(av, deadline)
	if err != nil {
		t.Fatal(err)
	}
	waited := next.Sub(at)
	if waited < time.Duration(th-50)*time.Millisecond {
		t.Fatalf("next request answered %v after a %d ms throttle", waited, th)
	}
	return waited
}

// TestConnectionRateQuota: connection_creation_rate on an ip entity
// (KIP-612). With 5 connections/s for 127.0.0.2, the first 50 connections
// from that address at once are served (Kafka's rate over the 10 s a
// fresh sensor measures); the next is held unanswered and then closed,
// and counted in the closed-connection metrics. Connections from
// 127.0.0.1 go on meanwhile, and DescribeClientQuotas lists the entity
// under an ip filter.
func TestConnectionRateQuota(t *testing.T) {
	metrics := fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t))
	b, ctx, cl := quotaBroker(t, "--metrics-listen", metrics)
	if e := alterQuotas(t, ctx, cl, false, quotaEntry(quotaEntity("ip", "127.0.0.2"), quotaOp{key: "connection_creation_rate", value: 5})).Entries[0]; e.ErrorCode != 0 {
		t.Fatalf("alter: %d %v", e.ErrorCode, deref(e.ErrorMessage))
	}
	got, err := describeQuotas(t, ctx, cl, true, quotaComp("ip", kmsg.QuotasMatchTypeExact, qstr("127.0.0.2")))
	if err != nil || got["ip=127.0.0.2"] != "connection_creation_rate=5" {
		t.Fatalf("describe ip: %v %v", got, err)
	}
	_, port, _ := net.SplitHostPort(b.Addr)
	from := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	apiVersions := func() kmsg.Request {
		av := kmsg.NewPtrApiVersionsRequest()
		av.Version = 0
		return av
	}
	for i := 0; i < 50; i++ {
		c, err := from.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		rc := &rawConn{c: c, clientID: "rate"}
		if _, _, err := rc.send(apiVersions(), deadline); err != nil {
			t.Fatalf("connection %d from 127.0.0.2: %v", i, err)
		}
	}
	c, err := from.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opened := time.Now()
	held := &rawConn{c: c, clientID: "rate"}
	// Another address meanwhile: served.
	if _, _, err := dialRaw(t, b.Addr, "other").send(apiVersions(), deadline); err != nil {
		t.Fatalf("a connection from 127.0.0.1: %v", err)
	}
	if resp, _, err := held.send(apiVersions(), deadline); err == nil {
		t.Fatalf("the 51st connection from 127.0.0.2 was served: %+v", resp)
	} else if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the 51st connection: %v, want it closed", err)
	}
	closedAfter := time.Since(opened)
	// Kafka's throttle for 51 over 10 s against 5/s: (5.1-5)/5 x 10 s.
	if closedAfter < 150*time.Millisecond || closedAfter > 2*time.Second {
		t.Fatalf("held connection closed after %v, want about 200 ms", closedAfter)
	}
	m := regexp.MustCompile(`regent_connections_closed_total\{[^}]*reason="connection_rate"[^}]*\} ([0-9.e+]+)`).FindStringSubmatch(scrape(t, metrics))
	if m == nil || m[1] == "0" {
		t.Fatalf("closed-connection metric for connection_rate: %v", m)
	}
	t.Logf("51st connection from 127.0.0.2 held %v, then closed; metric %s", closedAfter.Round(time.Millisecond), m[1])
}

// quotaBroker starts a broker (args as brokertest.Start's) and a kgo client
// of it, with a context for the test's requests; all end with the test.
func quotaBroker(t *testing.T, args ...string) (*brokertest.Broker, context.Context, *kgo.Client) {
	t.Helper()
	b := brokertest.Start(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return b, ctx, cl
}
