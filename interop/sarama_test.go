package interop_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// saramaVersions are the Config.Version values the sarama tests run at.
// V0_11_0_0 is the oldest the spec serves (Produce v3, record batches with
// headers; sarama's Fetch there is v5, it never sends v4); V2_1_0_0 the
// first with zstd; V2_8_0_0 sarama's default (DefaultVersion); V3_6_0_0 a
// recent one; MaxVersion the newest sarama knows.
var saramaVersions = []sarama.KafkaVersion{
	sarama.V0_11_0_0,
	sarama.V2_1_0_0,
	sarama.V2_8_0_0,
	sarama.V3_6_0_0,
	sarama.MaxVersion,
}

// TestSaramaClients runs admin, produce (plain, compressed, idempotent),
// consumer group, plain consumer and transactions with sarama at each of
// saramaVersions, against one broker.
//
// The clients reach the broker through a proxy that notes each request's
// API version (the broker advertises the proxy), so the log shows which
// versions each Config.Version really sent, and the oldest run is checked
// to have used Produce v3.
func TestSaramaClients(t *testing.T) {
	proxy := startVersionProxy(t)
	b := brokertest.Start(t, "--broker-config", "group.initial.rebalance.delay.ms=0", "--advertise", proxy.Addr())
	proxy.serve(b.Addr)
	for _, v := range saramaVersions {
		t.Run("v"+v.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			s := newSaramaScenario(t, ctx, []string{proxy.Addr()}, v)
			s.run()
			sent := proxy.take()
			t.Logf("sarama %s sent: %s", v, formatVersions(sent))
			if v == sarama.V0_11_0_0 && !slices.Equal(sent[0], []int16{3}) {
				t.Fatalf("sarama %s sent Produce %v, want only v3", v, sent[0])
			}
		})
	}
}

// TestSaramaCluster runs the scenario of TestSaramaClients against three
// nodes, with replicated topics, at the oldest and the default version:
// sarama must find the partition leaders, group and transaction
// coordinators from whichever node it asked first.
func TestSaramaCluster(t *testing.T) {
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3, "--broker-config", "group.initial.rebalance.delay.ms=0")
	c.WaitMetadata(t, 30*time.Second, nil, brokersAre(c, c.IDs()...))
	for _, v := range []sarama.KafkaVersion{sarama.V0_11_0_0, sarama.DefaultVersion} {
		t.Run("v"+v.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			s := newSaramaScenario(t, ctx, c.Seeds(), v)
			s.replicas = 3
			// Followers answer Metadata and DescribeConfigs from the state
			// they have applied, which trails the leader's (as a Kafka
			// broker's metadata cache trails the controller): wait for
			// every node, not just the one asked.
			s.ready = func(topic string, partitions int) {
				c.WaitTopic(t, topic, partitions, 3, 30*time.Second)
				for _, id := range c.IDs() {
					c.WaitCaughtUp(t, id, 30*time.Second)
				}
			}
			s.run()
		})
	}
}

// versionProxy forwards Kafka connections to a broker unchanged, noting
// the API key and version of every request.
type versionProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		seen  map[int16]map[int16]bool // API key -> versions sent
		conns map[net.Conn]struct{}    // open, to close at the end
	}
}

func startVersionProxy(t *testing.T) *versionProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &versionProxy{ln: ln}
	p.mu.seen = map[int16]map[int16]bool{}
	p.mu.conns = map[net.Conn]struct{}{}
	t.Cleanup(p.close)
	return p
}

func (p *versionProxy) Addr() string { return p.ln.Addr().String() }

// serve accepts connections, forwarding each to target, until close.
func (p *versionProxy) serve(target string) {
	p.target = target
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.pipe(c)
			}()
		}
	}()
}

// track notes c as open, or closes it and reports false once the proxy
// is closing.
func (p *versionProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.conns == nil {
		c.Close()
		return false
	}
	p.mu.conns[c] = struct{}{}
	return true
}

func (p *versionProxy) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client) || !p.track(server) {
		client.Close()
		server.Close()
		return
	}
	defer func() {
		client.Close()
		server.Close()
		p.mu.Lock()
		if p.mu.conns != nil {
			delete(p.mu.conns, client)
			delete(p.mu.conns, server)
		}
		p.mu.Unlock()
	}()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_, _ = io.Copy(client, server)
		client.Close()
		server.Close()
	}()
	r := bufio.NewReader(client)
	var size [4]byte
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		if n < 4 || n > 256<<20 {
			return
		}
		req := make([]byte, n)
		if _, err := io.ReadFull(r, req); err != nil {
			return
		}
		p.note(int16(binary.BigEndian.Uint16(req)), int16(binary.BigEndian.Uint16(req[2:])))
		if _, err := server.Write(append(size[:], req...)); err != nil {
			return
		}
	}
}

func (p *versionProxy) note(key, version int16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.seen[key] == nil {
		p.mu.seen[key] = map[int16]bool{}
	}
	p.mu.seen[key][version] = true
}

// take returns the versions sent per API key since the last take, sorted.
func (p *versionProxy) take() map[int16][]int16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int16][]int16{}
	for k, vs := range p.mu.seen {
		for v := range vs {
			out[k] = append(out[k], v)
		}
		slices.Sort(out[k])
	}
	p.mu.seen = map[int16]map[int16]bool{}
	return out
}

func (p *versionProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.mu.conns {
		c.Close()
	}
	p.mu.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func formatVersions(sent map[int16][]int16) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(sent)) {
		parts = append(parts, fmt.Sprintf("%s v%s", kmsg.NameForKey(k), strings.Trim(strings.ReplaceAll(fmt.Sprint(sent[k]), " ", ","), "[]")))
	}
	return strings.Join(parts, ", ")
}

// saramaRecord is what a test produced or consumed, in comparable form.
// A null key or value is told from an empty one.
type saramaRecord struct {
	key, value         string
	keyNull, valueNull bool
	headers            string
	timestampMs        int64
}

func (r saramaRecord) String() string {
	return fmt.Sprintf("{key %q (null %v) value %q (null %v) headers %q timestamp %d}", r.key, r.keyNull, r.value, r.valueNull, r.headers, r.timestampMs)
}

func saramaHeaders(hs []*sarama.RecordHeader) string {
	var parts []string
	for _, h := range hs {
		parts = append(parts, string(h.Key)+"="+string(h.Value))
	}
	return strings.Join(parts, ",")
}

func consumed(m *sarama.ConsumerMessage) saramaRecord {
	return saramaRecord{
		key: string(m.Key), keyNull: m.Key == nil,
		value: string(m.Value), valueNull: m.Value == nil,
		headers: saramaHeaders(m.Headers), timestampMs: m.Timestamp.UnixMilli(),
	}
}

// saramaScenario is one version's run. expected holds, per partition and
// offset, every record the producers were told was written to topic.
type saramaScenario struct {
	t        *testing.T
	ctx      context.Context
	addrs    []string
	version  sarama.KafkaVersion
	replicas int16                              // of each topic
	ready    func(topic string, partitions int) // waits for a created or grown topic, if set
	topic    string
	group    string
	seq      int
	expected map[int32]map[int64]saramaRecord
	summary  []string
}

const saramaPartitions = 4

func newSaramaScenario(t *testing.T, ctx context.Context, addrs []string, v sarama.KafkaVersion) *saramaScenario {
	return &saramaScenario{t: t, ctx: ctx, addrs: addrs, version: v, replicas: 1, expected: map[int32]map[int64]saramaRecord{}}
}

// created waits, if the scenario has to, until topic is ready with its
// partitions.
func (s *saramaScenario) created(topic string, partitions int) {
	if s.ready != nil {
		s.ready(topic, partitions)
	}
}

func (s *saramaScenario) config() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = s.version
	cfg.ClientID = "regent-sarama-test"
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	cfg.Producer.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cfg.Admin.Retry.Backoff = 50 * time.Millisecond
	cfg.Admin.Timeout = 10 * time.Second
	return cfg
}

func (s *saramaScenario) note(format string, args ...any) {
	s.summary = append(s.summary, fmt.Sprintf(format, args...))
}

func (s *saramaScenario) run() {
	name := strings.ReplaceAll(s.version.String(), ".", "_")
	s.topic, s.group = "sarama-"+name, "sarama-group-"+name
	start := time.Now()
	admin := s.admin()
	defer admin.Close()

	s.adminTopic(admin)
	s.produceSync(40)
	s.produceAsync()
	s.produceIdempotent(30)
	total := s.count()
	s.groupRun(admin, "first", 1, total, nil)
	s.groupRun(admin, "resumed", 2, 20, func() { s.produceSync(20) })
	msg := s.plainConsumer()
	s.transactions(admin, msg)
	s.logAppendTime(admin)
	s.offsetsForTimes()
	s.autoCreate(admin)
	s.deleteRecords(admin)
	s.listGroups(admin)
	if err := admin.DeleteTopic(s.topic); err != nil {
		s.t.Fatalf("DeleteTopic: %v", err)
	}
	s.note("DeleteTopic")
	s.t.Logf("sarama %s: %s (%v)", s.version, strings.Join(s.summary, "; "), time.Since(start).Round(time.Millisecond))
}

func (s *saramaScenario) admin() sarama.ClusterAdmin {
	s.t.Helper()
	admin, err := sarama.NewClusterAdmin(s.addrs, s.config())
	if err != nil {
		s.t.Fatalf("NewClusterAdmin: %v", err)
	}
	return admin
}

func (s *saramaScenario) count() int {
	n := 0
	for _, recs := range s.expected {
		n += len(recs)
	}
	return n
}

// adminTopic creates the topic with 3 partitions and two config entries,
// checks what DescribeTopics, DescribeConfig and ListTopics say, then grows
// it to saramaPartitions.
func (s *saramaScenario) adminTopic(admin sarama.ClusterAdmin) {
	t := s.t
	retention, maxBytes := "7200000", "524288"
	// CreatePartitions came with Kafka 1.0 (KIP-195): sarama refuses it
	// below V1_0_0_0 without asking, so older versions create all the
	// partitions at once.
	grow := s.version.IsAtLeast(sarama.V1_0_0_0)
	initial := int32(saramaPartitions)
	if grow {
		initial = 3
	}
	err := admin.CreateTopic(s.topic, &sarama.TopicDetail{
		NumPartitions:     initial,
		ReplicationFactor: s.replicas,
		ConfigEntries:     map[string]*string{"retention.ms": &retention, "max.message.bytes": &maxBytes},
	}, false)
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if err := admin.CreateTopic(s.topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: s.replicas}, false); !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Fatalf("CreateTopic again: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	s.created(s.topic, int(initial))
	md, err := admin.DescribeTopics([]string{s.topic})
	if err != nil || len(md) != 1 || !errors.Is(md[0].Err, sarama.ErrNoError) || len(md[0].Partitions) != int(initial) {
		t.Fatalf("DescribeTopics: %v %+v", err, md)
	}
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: s.topic})
	if err != nil {
		t.Fatalf("DescribeConfig: %v", err)
	}
	got := map[string]sarama.ConfigEntry{}
	for _, e := range entries {
		got[e.Name] = e
	}
	if got["retention.ms"].Value != retention || got["max.message.bytes"].Value != maxBytes || got["retention.ms"].Default {
		t.Fatalf("DescribeConfig: retention.ms %+v, max.message.bytes %+v", got["retention.ms"], got["max.message.bytes"])
	}
	// v0 says is_default, v1+ a source: sarama maps both to Default.
	if e, ok := got["cleanup.policy"]; !ok || e.Value != "delete" || !e.Default || e.ReadOnly {
		t.Fatalf("DescribeConfig: cleanup.policy %+v (present %v), want the default delete", e, ok)
	}
	if s.version.IsAtLeast(sarama.V1_1_0_0) && got["retention.ms"].Source != sarama.SourceTopic {
		t.Fatalf("DescribeConfig: retention.ms source %v, want topic", got["retention.ms"].Source)
	}
	topics, err := admin.ListTopics()
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	d, ok := topics[s.topic]
	if !ok || d.NumPartitions != initial || d.ConfigEntries["retention.ms"] == nil || *d.ConfigEntries["retention.ms"] != retention {
		t.Fatalf("ListTopics: %s: present %v, %+v", s.topic, ok, d)
	}
	s.note("admin: CreateTopic, DescribeTopics, DescribeConfig (%d entries), ListTopics", len(entries))
	if !grow {
		return
	}
	if err := admin.CreatePartitions(s.topic, saramaPartitions, nil, false); err != nil {
		t.Fatalf("CreatePartitions: %v", err)
	}
	s.created(s.topic, saramaPartitions)
	md, err = admin.DescribeTopics([]string{s.topic})
	if err != nil || len(md) != 1 || len(md[0].Partitions) != saramaPartitions {
		t.Fatalf("DescribeTopics after CreatePartitions: %v %+v", err, md)
	}
	s.note("CreatePartitions %d->%d", initial, saramaPartitions)
}

// saramaEpochMs is the first record's timestamp; each next one is a
// millisecond later, so that a timestamp a batch garbles shows.
const saramaEpochMs = 1_700_000_000_000

// message makes the next keyed message with two headers and its own
// timestamp. Keys repeat, so the hash partitioner spreads them over every
// partition; a few keys are null, a few values null (tombstones) or empty.
func (s *saramaScenario) message(tag string) *sarama.ProducerMessage {
	i := s.seq
	s.seq++
	m := &sarama.ProducerMessage{
		Topic: s.topic,
		Key:   sarama.StringEncoder(fmt.Sprintf("key-%d", i%11)),
		Value: sarama.StringEncoder(fmt.Sprintf("%s-value-%d", tag, i)),
		Headers: []sarama.RecordHeader{
			{Key: []byte("seq"), Value: []byte(fmt.Sprint(i))},
			{Key: []byte("tag"), Value: []byte(tag)},
		},
		Timestamp: time.UnixMilli(saramaEpochMs + int64(i)),
	}
	switch {
	case i%13 == 5:
		m.Key = nil
	case i%17 == 7:
		m.Value = nil
	case i%19 == 3:
		m.Value = sarama.ByteEncoder([]byte{})
	}
	return m
}

// record notes a message the producer acknowledged at its partition and
// offset, failing on an offset given twice.
func (s *saramaScenario) record(m *sarama.ProducerMessage) {
	s.t.Helper()
	encode := func(e sarama.Encoder) (string, bool) {
		if e == nil {
			return "", true
		}
		b, err := e.Encode()
		if err != nil {
			s.t.Fatalf("encode: %v", err)
		}
		return string(b), b == nil
	}
	var r saramaRecord
	r.key, r.keyNull = encode(m.Key)
	r.value, r.valueNull = encode(m.Value)
	var hs []*sarama.RecordHeader
	for i := range m.Headers {
		hs = append(hs, &m.Headers[i])
	}
	r.headers = saramaHeaders(hs)
	r.timestampMs = m.Timestamp.UnixMilli()
	if s.expected[m.Partition] == nil {
		s.expected[m.Partition] = map[int64]saramaRecord{}
	}
	if prev, dup := s.expected[m.Partition][m.Offset]; dup {
		s.t.Fatalf("partition %d offset %d acknowledged twice: %v and %v", m.Partition, m.Offset, prev, r)
	}
	s.expected[m.Partition][m.Offset] = r
}

func (s *saramaScenario) syncProducer(cfg *sarama.Config) sarama.SyncProducer {
	s.t.Helper()
	cfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(s.addrs, cfg)
	if err != nil {
		s.t.Fatalf("NewSyncProducer: %v", err)
	}
	return p
}

// produceSync sends n messages with acks=all: half one by one, half as
// one SendMessages call.
func (s *saramaScenario) produceSync(n int) {
	t := s.t
	cfg := s.config()
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	p := s.syncProducer(cfg)
	defer p.Close()
	var batch []*sarama.ProducerMessage
	for i := 0; i < n; i++ {
		m := s.message("sync")
		if i%2 == 0 {
			if _, _, err := p.SendMessage(m); err != nil {
				t.Fatalf("SendMessage: %v", err)
			}
			s.record(m)
		} else {
			batch = append(batch, m)
		}
	}
	if err := p.SendMessages(batch); err != nil {
		t.Fatalf("SendMessages: %v", err)
	}
	for _, m := range batch {
		s.record(m)
	}
	s.note("sync acks=all %d", n)
}

// produceAsync sends 50 messages with each codec the version allows
// through an AsyncProducer, lingering so that batches hold many records.
func (s *saramaScenario) produceAsync() {
	t := s.t
	codecs := []sarama.CompressionCodec{sarama.CompressionGZIP, sarama.CompressionSnappy, sarama.CompressionLZ4}
	if s.version.IsAtLeast(sarama.V2_1_0_0) {
		codecs = append(codecs, sarama.CompressionZSTD)
	}
	const perCodec = 50
	for _, codec := range codecs {
		cfg := s.config()
		cfg.Producer.Compression = codec
		cfg.Producer.Return.Successes = true
		cfg.Producer.Flush.Frequency = 5 * time.Millisecond
		cfg.Producer.Flush.Messages = 20
		p, err := sarama.NewAsyncProducer(s.addrs, cfg)
		if err != nil {
			t.Fatalf("NewAsyncProducer %s: %v", codec, err)
		}
		for i := 0; i < perCodec; i++ {
			select {
			case p.Input() <- s.message(codec.String()):
			case <-s.ctx.Done():
				t.Fatalf("async %s: input blocked: %v", codec, s.ctx.Err())
			}
		}
		for done := 0; done < perCodec; done++ {
			select {
			case m := <-p.Successes():
				s.record(m)
			case err := <-p.Errors():
				t.Fatalf("async %s: %v", codec, err)
			case <-s.ctx.Done():
				t.Fatalf("async %s: %d of %d acknowledged: %v", codec, done, perCodec, s.ctx.Err())
			}
		}
		if err := p.Close(); err != nil {
			t.Fatalf("async %s close: %v", codec, err)
		}
	}
	s.note("async %d x %v", perCodec, codecs)
}

// produceIdempotent sends n messages with an idempotent producer.
func (s *saramaScenario) produceIdempotent(n int) {
	cfg := s.config()
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	p := s.syncProducer(cfg)
	defer p.Close()
	for i := 0; i < n; i++ {
		m := s.message("idem")
		if _, _, err := p.SendMessage(m); err != nil {
			s.t.Fatalf("idempotent SendMessage: %v", err)
		}
		s.record(m)
	}
	s.note("idempotent %d", n)
}

// saramaHandler passes every claimed message to got, marking it first, so
// that by the time a test has received a message its offset is marked.
// It keeps its member's current session.
type saramaHandler struct {
	got     chan *sarama.ConsumerMessage
	session atomic.Pointer[sarama.ConsumerGroupSession]
	setups  atomic.Int32
}

func (h *saramaHandler) Setup(sess sarama.ConsumerGroupSession) error {
	h.session.Store(&sess)
	h.setups.Add(1)
	return nil
}

func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			sess.MarkMessage(m, "")
			select {
			case h.got <- m:
			case <-sess.Context().Done():
				return nil
			}
		case <-sess.Context().Done():
			return nil
		}
	}
}

// groupRun starts members consumers of the group, waits for them to share
// the partitions in one generation, calls produce (if any), and consumes
// want records from the committed offsets (the oldest when there are
// none). Then it commits, checks what the admin API says about the group,
// and the members leave. Every record consumed must be one produced and
// not yet consumed by the group, in offset order per partition, and the
// commits must reach each partition's end.
func (s *saramaScenario) groupRun(admin sarama.ClusterAdmin, phase string, members, want int, produce func()) {
	t := s.t
	committed := s.committed(admin)
	// The first run (nothing to produce) finds no commits; a later one
	// finds each partition committed to its end.
	for p, off := range committed {
		if first := produce == nil; first && off != -1 || !first && off != s.end(p) {
			t.Fatalf("%s: partition %d committed offset %d before the group ran", phase, p, off)
		}
	}
	cfg := s.config()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	// Sent as OffsetCommit v2-v4's retention time; later versions drop it.
	cfg.Consumer.Offsets.Retention = time.Hour
	cfg.Consumer.Return.Errors = true
	// A member learns of a rebalance at its next heartbeat: keep joins quick.
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	// Members joining together race: the first one's SyncGroup can meet
	// the rebalance the second one's JoinGroup started and get
	// REBALANCE_IN_PROGRESS (as from Kafka), after which sarama waits
	// this long (2s by default) before joining again.
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(s.ctx)
	got := make(chan *sarama.ConsumerMessage, 64)
	errs := make(chan error, 16)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	var wg sync.WaitGroup
	var groups []sarama.ConsumerGroup
	var handlers []*saramaHandler
	defer func() {
		cancel()
		for _, g := range groups {
			if err := g.Close(); err != nil {
				t.Errorf("%s: consumer group close: %v", phase, err)
			}
		}
		wg.Wait()
	}()
	for range members {
		g, err := sarama.NewConsumerGroup(s.addrs, s.group, cfg)
		if err != nil {
			t.Fatalf("NewConsumerGroup: %v", err)
		}
		h := &saramaHandler{got: got}
		groups, handlers = append(groups, g), append(handlers, h)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := g.Consume(ctx, []string{s.topic}, h); err != nil && ctx.Err() == nil {
					report(fmt.Errorf("Consume: %w", err))
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for err := range g.Errors() {
				report(err)
			}
		}()
	}
	if produce != nil {
		// Produce only once every member holds its share of one
		// generation: no rebalance can then hand a record to two members.
		testwait.For(t, phase+": group settled", 20*time.Second, func() bool {
			return s.settled(handlers)
		})
		produce()
	}

	next := map[int32]int64{}
	for n := 0; n < want; n++ {
		select {
		case m := <-got:
			from := committed[m.Partition]
			if m.Offset < from {
				t.Fatalf("%s: group read partition %d offset %d below its committed offset %d", phase, m.Partition, m.Offset, from)
			}
			if m.Offset < next[m.Partition] {
				t.Fatalf("%s: partition %d offset %d after %d: out of order or twice", phase, m.Partition, m.Offset, next[m.Partition]-1)
			}
			next[m.Partition] = m.Offset + 1
			s.checkRecord(phase, m)
		case err := <-errs:
			t.Fatalf("%s: consumer group: %v", phase, err)
		case <-s.ctx.Done():
			t.Fatalf("%s: group read %d of %d records: %v", phase, n, want, s.ctx.Err())
		}
	}
	var sessions int32
	for _, h := range handlers {
		if sess := h.session.Load(); sess != nil {
			(*sess).Commit()
		}
		sessions += h.setups.Load()
	}
	// Every partition's commit must now be its end: nothing was skipped.
	after := s.committed(admin)
	for p := int32(0); p < saramaPartitions; p++ {
		if end := s.end(p); after[p] != end {
			t.Fatalf("%s: partition %d committed %d, want the end %d", phase, p, after[p], end)
		}
	}
	descs, err := admin.DescribeConsumerGroups([]string{s.group})
	if err != nil || len(descs) != 1 {
		t.Fatalf("DescribeConsumerGroups: %v %+v", err, descs)
	}
	d := descs[0]
	if d.State != "Stable" || d.ProtocolType != "consumer" || len(d.Members) != members {
		t.Fatalf("DescribeConsumerGroups: state %q protocol type %q, %d members, want Stable, consumer, %d", d.State, d.ProtocolType, len(d.Members), members)
	}
	assigned := 0
	for _, m := range d.Members {
		a, err := m.GetMemberAssignment()
		if err != nil {
			t.Fatalf("DescribeConsumerGroups: member %s assignment: %v", m.MemberId, err)
		}
		assigned += len(a.Topics[s.topic])
		md, err := m.GetMemberMetadata()
		if err != nil || !slices.Equal(md.Topics, []string{s.topic}) || m.ClientId != cfg.ClientID || m.ClientHost == "" {
			t.Fatalf("DescribeConsumerGroups: member %s client %q host %q metadata %+v: %v", m.MemberId, m.ClientId, m.ClientHost, md, err)
		}
	}
	if assigned != saramaPartitions {
		t.Fatalf("DescribeConsumerGroups: %d partitions assigned, want %d", assigned, saramaPartitions)
	}
	s.note("group %s: %d members read %d records (%d sessions), committed", phase, members, want, sessions)
}

// settled reports whether every handler has a session of one generation
// and the sessions' claims cover each partition once.
func (s *saramaScenario) settled(handlers []*saramaHandler) bool {
	gen, claimed := int32(-1), 0
	for _, h := range handlers {
		sess := h.session.Load()
		if sess == nil || (*sess).Context().Err() != nil {
			return false
		}
		if gen != -1 && (*sess).GenerationID() != gen {
			return false
		}
		gen = (*sess).GenerationID()
		n := len((*sess).Claims()[s.topic])
		if n == 0 {
			return false
		}
		claimed += n
	}
	return claimed == saramaPartitions
}

// end is one past the last offset produced to partition p.
func (s *saramaScenario) end(p int32) int64 {
	var end int64
	for off := range s.expected[p] {
		end = max(end, off+1)
	}
	return end
}

// committed is the group's committed offset per partition, -1 for none.
func (s *saramaScenario) committed(admin sarama.ClusterAdmin) map[int32]int64 {
	s.t.Helper()
	parts := make([]int32, saramaPartitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	resp, err := admin.ListConsumerGroupOffsets(s.group, map[string][]int32{s.topic: parts})
	if err != nil {
		s.t.Fatalf("ListConsumerGroupOffsets: %v", err)
	}
	out := map[int32]int64{}
	for _, p := range parts {
		blk := resp.GetBlock(s.topic, p)
		if blk == nil || !errors.Is(blk.Err, sarama.ErrNoError) {
			s.t.Fatalf("ListConsumerGroupOffsets: partition %d: %+v", p, blk)
		}
		out[p] = blk.Offset
	}
	return out
}

// checkRecord fails unless m is the record produced at its offset.
func (s *saramaScenario) checkRecord(phase string, m *sarama.ConsumerMessage) {
	s.t.Helper()
	want, ok := s.expected[m.Partition][m.Offset]
	if got := consumed(m); !ok || got != want {
		s.t.Fatalf("%s: partition %d offset %d: got %v, want %v (produced: %v)", phase, m.Partition, m.Offset, got, want, ok)
	}
}

// plainConsumer reads every partition from OffsetOldest with a plain
// Consumer and checks it holds exactly what was produced. It returns one
// message, for the transaction test's AddMessageToTxn.
func (s *saramaScenario) plainConsumer() *sarama.ConsumerMessage {
	t := s.t
	c, err := sarama.NewConsumer(s.addrs, s.config())
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	defer c.Close()
	parts, err := c.Partitions(s.topic)
	if err != nil || len(parts) != saramaPartitions {
		t.Fatalf("Partitions: %v %v", parts, err)
	}
	var last *sarama.ConsumerMessage
	n := 0
	for _, p := range parts {
		pc, err := c.ConsumePartition(s.topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("ConsumePartition %d: %v", p, err)
		}
		want := int64(len(s.expected[p]))
		for off := int64(0); off < want; off++ {
			select {
			case m := <-pc.Messages():
				if m.Offset != off {
					t.Fatalf("plain consumer: partition %d offset %d, want %d", p, m.Offset, off)
				}
				s.checkRecord("plain consumer", m)
				last = m
				n++
			case err := <-pc.Errors():
				t.Fatalf("plain consumer partition %d: %v", p, err)
			case <-s.ctx.Done():
				t.Fatalf("plain consumer partition %d: %d of %d: %v", p, off, want, s.ctx.Err())
			}
		}
		if hwm := pc.HighWaterMarkOffset(); hwm != want {
			t.Fatalf("plain consumer partition %d: high watermark %d, want %d", p, hwm, want)
		}
		if err := pc.Close(); err != nil {
			t.Fatalf("partition consumer close: %v", err)
		}
	}
	s.note("plain consumer %d from oldest", n)
	return last
}

// transactions commits one transaction, aborts one, and commits a third
// that also carries consumer offsets (AddMessageToTxn, AddOffsetsToTxn).
// A read_committed consumer must see only the committed records, a
// read_uncommitted one all of them; the offsets must be committed.
func (s *saramaScenario) transactions(admin sarama.ClusterAdmin, fromTopic *sarama.ConsumerMessage) {
	t := s.t
	topic := s.topic + "-txn"
	txGroup := s.group + "-txn"
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: s.replicas}, false); err != nil {
		t.Fatalf("CreateTopic %s: %v", topic, err)
	}
	s.created(topic, 2)
	defer func() {
		if err := admin.DeleteTopic(topic); err != nil {
			t.Errorf("DeleteTopic %s: %v", topic, err)
		}
	}()
	cfg := s.config()
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Transaction.ID = "sarama-txn-" + s.version.String()
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Net.MaxOpenRequests = 1
	p := s.syncProducer(cfg)
	defer p.Close()

	var committed, aborted []string
	txn := func(tag string, n int, extra func()) {
		t.Helper()
		if err := p.BeginTxn(); err != nil {
			t.Fatalf("BeginTxn %s: %v", tag, err)
		}
		for i := 0; i < n; i++ {
			// Both partitions get records of every transaction, so that
			// an aborted record would come before a committed one.
			v := fmt.Sprintf("%s-%d", tag, i)
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: int32(i % 2), Value: sarama.StringEncoder(v)}); err != nil {
				t.Fatalf("txn %s send: %v", tag, err)
			}
			if tag == "abort" {
				aborted = append(aborted, v)
			} else {
				committed = append(committed, v)
			}
		}
		if extra != nil {
			extra()
		}
		var err error
		if tag == "abort" {
			err = p.AbortTxn()
		} else {
			err = p.CommitTxn()
		}
		if err != nil {
			t.Fatalf("end txn %s: %v", tag, err)
		}
	}
	txn("commit1", 10, nil)
	txn("abort", 10, nil)
	txn("commit2", 6, func() {
		if err := p.AddMessageToTxn(fromTopic, txGroup, nil); err != nil {
			t.Fatalf("AddMessageToTxn: %v", err)
		}
		offs := map[string][]*sarama.PartitionOffsetMetadata{topic: {{Partition: 1, Offset: 3, LeaderEpoch: -1}}}
		if err := p.AddOffsetsToTxn(offs, txGroup); err != nil {
			t.Fatalf("AddOffsetsToTxn: %v", err)
		}
	})

	readCommitted := s.readTxnTopic(topic, sarama.ReadCommitted, committed)
	for _, v := range readCommitted {
		if strings.HasPrefix(v, "abort") {
			t.Fatalf("read_committed consumer saw aborted record %q", v)
		}
	}
	s.readTxnTopic(topic, sarama.ReadUncommitted, append(slices.Clone(committed), aborted...))

	resp, err := admin.ListConsumerGroupOffsets(txGroup, map[string][]int32{fromTopic.Topic: {fromTopic.Partition}, topic: {1}})
	if err != nil {
		t.Fatalf("ListConsumerGroupOffsets %s: %v", txGroup, err)
	}
	if blk := resp.GetBlock(fromTopic.Topic, fromTopic.Partition); blk == nil || blk.Offset != fromTopic.Offset+1 {
		t.Fatalf("AddMessageToTxn: committed %+v, want offset %d", blk, fromTopic.Offset+1)
	}
	if blk := resp.GetBlock(topic, 1); blk == nil || blk.Offset != 3 {
		t.Fatalf("AddOffsetsToTxn: committed %+v, want offset 3", blk)
	}
	s.note("txn: committed %d, aborted %d, read_committed saw %d, offsets in txn committed", len(committed), len(aborted), len(readCommitted))
}

// readTxnTopic reads topic's two partitions from the oldest offset at the
// given isolation level until every value in want has arrived, and
// returns the values read. Records come in offset order per partition and
// each partition's last record is one of want, so a record the isolation
// level should hide would have arrived by then.
func (s *saramaScenario) readTxnTopic(topic string, iso sarama.IsolationLevel, want []string) []string {
	t := s.t
	cfg := s.config()
	cfg.Consumer.IsolationLevel = iso
	c, err := sarama.NewConsumer(s.addrs, cfg)
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	defer c.Close()
	msgs := make(chan *sarama.ConsumerMessage)
	errs := make(chan error, 2)
	var pcs []sarama.PartitionConsumer
	for p := int32(0); p < 2; p++ {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("ConsumePartition %s/%d: %v", topic, p, err)
		}
		pcs = append(pcs, pc)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	var wg sync.WaitGroup
	for _, pc := range pcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case m := <-pc.Messages():
					select {
					case msgs <- m:
					case <-ctx.Done():
						return
					}
				case err := <-pc.Errors():
					errs <- err
					return
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	missing := map[string]bool{}
	for _, v := range want {
		missing[v] = true
	}
	var got []string
	for len(missing) > 0 {
		select {
		case m := <-msgs:
			v := string(m.Value)
			got = append(got, v)
			if !missing[v] && !slices.Contains(want, v) {
				t.Fatalf("isolation %d: unexpected record %q at %d/%d", iso, v, m.Partition, m.Offset)
			}
			if !missing[v] {
				t.Fatalf("isolation %d: record %q twice", iso, v)
			}
			delete(missing, v)
		case err := <-errs:
			t.Fatalf("isolation %d: %v", iso, err)
		case <-s.ctx.Done():
			t.Fatalf("isolation %d: %d records missing, e.g. %v: %v", iso, len(missing), slices.Collect(func(yield func(string) bool) {
				for v := range missing {
					if !yield(v) {
						return
					}
				}
			}), s.ctx.Err())
		}
	}
	return got
}

// logAppendTime produces to a topic with message.timestamp.type
// LogAppendTime: the broker must replace the producer's timestamps with
// its own, in the produce response and in the batches consumers read.
func (s *saramaScenario) logAppendTime(admin sarama.ClusterAdmin) {
	t := s.t
	topic := s.topic + "-lat"
	typ := "LogAppendTime"
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: s.replicas, ConfigEntries: map[string]*string{"message.timestamp.type": &typ}}, false); err != nil {
		t.Fatalf("CreateTopic %s: %v", topic, err)
	}
	s.created(topic, 1)
	defer func() {
		if err := admin.DeleteTopic(topic); err != nil {
			t.Errorf("DeleteTopic %s: %v", topic, err)
		}
	}()
	cfg := s.config()
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	p := s.syncProducer(cfg)
	defer p.Close()
	var msgs []*sarama.ProducerMessage
	for i := range 3 {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprint(i)), Timestamp: time.UnixMilli(saramaEpochMs)})
	}
	// Whole milliseconds: the broker's clock is read in them.
	before := time.Now().Truncate(time.Millisecond)
	if err := p.SendMessages(msgs); err != nil {
		t.Fatalf("LogAppendTime produce: %v", err)
	}
	after := time.Now()
	// SendMessages may send the three in more than one batch, each with
	// its own append time: sarama sets each message's from its batch's.
	for _, m := range msgs {
		if m.Timestamp.Before(before) || m.Timestamp.After(after) {
			t.Fatalf("LogAppendTime produce: acknowledged with timestamp %v, want the append time, in [%v, %v]", m.Timestamp, before, after)
		}
	}
	c, err := sarama.NewConsumer(s.addrs, s.config())
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("ConsumePartition %s: %v", topic, err)
	}
	defer pc.Close()
	for i := range msgs {
		select {
		case m := <-pc.Messages():
			if !m.Timestamp.Equal(msgs[i].Timestamp) || string(m.Value) != fmt.Sprint(i) {
				t.Fatalf("LogAppendTime consume: offset %d value %q timestamp %v, want %d at %v", m.Offset, m.Value, m.Timestamp, i, msgs[i].Timestamp)
			}
		case err := <-pc.Errors():
			t.Fatalf("LogAppendTime consume: %v", err)
		case <-s.ctx.Done():
			t.Fatalf("LogAppendTime consume: %v", s.ctx.Err())
		}
	}
	s.note("LogAppendTime")
}

// offsetsForTimes looks offsets up by timestamp (ListOffsets v1+): the
// answer is the first offset whose timestamp is at least the one asked,
// or -1 past the last. Per partition, the records' timestamps grow with
// their offsets (see message), so the expected offset is the first one
// at or above the timestamp.
func (s *saramaScenario) offsetsForTimes() {
	t := s.t
	client, err := sarama.NewClient(s.addrs, s.config())
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer client.Close()
	lookups := 0
	for p := int32(0); p < saramaPartitions; p++ {
		recs := s.expected[p]
		offs := slices.Sorted(maps.Keys(recs))
		// Each record's own timestamp, one just after it, and past the end.
		for _, i := range []int{0, len(offs) / 2, len(offs) - 1} {
			ts := recs[offs[i]].timestampMs
			for _, q := range []int64{ts, ts + 1} {
				want := int64(-1)
				for _, off := range offs {
					if recs[off].timestampMs >= q {
						want = off
						break
					}
				}
				got, err := client.GetOffset(s.topic, p, q)
				if err != nil || got != want {
					t.Fatalf("GetOffset(%s/%d, timestamp %d): %d, %v; want %d", s.topic, p, q, got, err, want)
				}
				lookups++
			}
		}
	}
	s.note("%d offsets by timestamp", lookups)
}

// autoCreate produces to a topic that does not exist: the Metadata
// request allows auto-creation (v4+) and the broker, as Kafka by
// default, creates it.
func (s *saramaScenario) autoCreate(admin sarama.ClusterAdmin) {
	t := s.t
	topic := s.topic + "-auto"
	cfg := s.config()
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	p := s.syncProducer(cfg)
	defer p.Close()
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("auto")}); err != nil {
		t.Fatalf("produce to a new topic: %v", err)
	}
	if err := admin.DeleteTopic(topic); err != nil {
		t.Fatalf("DeleteTopic %s: %v", topic, err)
	}
	s.note("auto-created topic")
}

// deleteRecords deletes the first records of partition 0 and checks the
// log start offset moved: by ListOffsets and by a consumer from oldest.
func (s *saramaScenario) deleteRecords(admin sarama.ClusterAdmin) {
	t := s.t
	const cut = 3
	if err := admin.DeleteRecords(s.topic, map[int32]int64{0: cut}); err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	client, err := sarama.NewClient(s.addrs, s.config())
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer client.Close()
	if off, err := client.GetOffset(s.topic, 0, sarama.OffsetOldest); err != nil || off != cut {
		t.Fatalf("GetOffset oldest after DeleteRecords: %d, %v; want %d", off, err, cut)
	}
	if off, err := client.GetOffset(s.topic, 0, sarama.OffsetNewest); err != nil || off != s.end(0) {
		t.Fatalf("GetOffset newest: %d, %v; want %d", off, err, s.end(0))
	}
	c, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatalf("NewConsumerFromClient: %v", err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(s.topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("ConsumePartition after DeleteRecords: %v", err)
	}
	defer pc.Close()
	select {
	case m := <-pc.Messages():
		if m.Offset != cut {
			t.Fatalf("first offset after DeleteRecords: %d, want %d", m.Offset, cut)
		}
		s.checkRecord("after DeleteRecords", m)
	case err := <-pc.Errors():
		t.Fatalf("consume after DeleteRecords: %v", err)
	case <-s.ctx.Done():
		t.Fatalf("consume after DeleteRecords: %v", s.ctx.Err())
	}
	s.note("DeleteRecords to %d, ListOffsets", cut)
}

// listGroups checks ListConsumerGroups names the test's groups as consumer
// groups, and the main group's description once its member left.
func (s *saramaScenario) listGroups(admin sarama.ClusterAdmin) {
	t := s.t
	groups, err := admin.ListConsumerGroups()
	if err != nil {
		t.Fatalf("ListConsumerGroups: %v", err)
	}
	if groups[s.group] != "consumer" {
		t.Fatalf("ListConsumerGroups: %s is %q in %v", s.group, groups[s.group], groups)
	}
	descs, err := admin.DescribeConsumerGroups([]string{s.group})
	if err != nil || len(descs) != 1 || descs[0].State != "Empty" || len(descs[0].Members) != 0 {
		t.Fatalf("DescribeConsumerGroups after leaving: %v %+v", err, descs)
	}
	s.note("ListConsumerGroups (%d), DescribeConsumerGroups", len(groups))
}
