package interop_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestEveryServedRequestFilled sends a running broker one request of
// every served API key and version with every field set (the committed
// FuzzDecodeRequest seeds: lists of one element, strings "s", numbers 1,
// a valid record batch), each on a connection of its own, to a broker
// where topic "s" and group "s" exist, so handlers go past their "not
// found" answers. Each request must be answered or its connection
// closed, no handler may panic (the broker recovers and logs "panicked":
// the test fails on that line), and the broker must serve a fresh client
// after all of them: one node with ACLs off and on, and a 3-node
// cluster's follower.
func TestEveryServedRequestFilled(t *testing.T) {
	seeds := fuzzSeeds(t)
	// Deleting keys go last, so the others find "s" in place.
	last := func(name string) bool {
		for _, k := range []string{"20_", "42_", "47_", "92_"} {
			if strings.HasPrefix(name, k) {
				return true
			}
		}
		return false
	}
	sort.SliceStable(seeds, func(i, j int) bool { return !last(seeds[i].name) && last(seeds[j].name) })
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"plain", nil},
		{"acl", []string{"--authorizer", "acl", "--broker-config", "allow.everyone.if.no.acl.found=true"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			b := brokertest.Start(t, mode.args...)
			serveEverySeed(t, seeds, b.Addr, []*brokertest.Broker{b})
		})
	}
	// Mutated: bytes of the bodies set to 0x00, 0xff, 0x7f or 0x80 (negative,
	// huge and zero numbers, lengths and counts, flags), a few per request,
	// from a fixed seed; what still decodes reaches the handlers.
	t.Run("mutated", func(t *testing.T) {
		b := brokertest.Start(t)
		// REGENT_MUTATIONS=N[,SEED] runs a longer hunt by hand.
		count, seed := mutatedRequests, uint64(36)
		if v := os.Getenv("REGENT_MUTATIONS"); v != "" {
			n, sd, _ := strings.Cut(v, ",")
			count, _ = strconv.Atoi(n)
			if x, err := strconv.ParseUint(sd, 10, 64); err == nil {
				seed = x
			}
		}
		rng := rand.New(rand.NewPCG(seed, uint64(len(seeds))))
		var mutated []fuzzSeed
		for i := range count {
			s := seeds[rng.IntN(len(seeds))]
			frame := bytes.Clone(s.frame)
			// The header (key, version, correlation id) stays: the
			// request is still that API's, and answers can be matched.
			for range 1 + rng.IntN(3) {
				at := 8 + rng.IntN(len(frame)-8)
				frame[at] = []byte{0x00, 0xff, 0x7f, 0x80}[rng.IntN(4)]
			}
			mutated = append(mutated, fuzzSeed{fmt.Sprintf("%s mutation %d", s.name, i), frame})
		}
		serveEverySeed(t, mutated, b.Addr, []*brokertest.Broker{b})
	})
	// On a cluster, sent to a follower: forwarded requests go to the
	// leader, the others are answered (or pointed at the leader) there.
	t.Run("cluster-follower", func(t *testing.T) {
		c := brokertest.StartCluster(t, 3)
		leader := c.LeaderID(t)
		var follower string
		var all []*brokertest.Broker
		for _, n := range c.Nodes() {
			all = append(all, n.Broker)
			if n.ID != leader && follower == "" {
				follower = n.Addr
			}
		}
		serveEverySeed(t, seeds, follower, all)
	})
}

// serveEverySeed makes topic "s" (with a record) and group "s" through
// addr, sends every seed to addr on its own connection, and checks that
// each was answered or its connection closed, that none of brokers logged
// a handler panic or exited, and that addr then serves a fresh client.
func serveEverySeed(t *testing.T, seeds []fuzzSeed, addr string, brokers []*brokertest.Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := newAdmin(t, addr)
	if _, err := adm.CreateTopic(ctx, 2, -1, nil, "s"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("s"), kgo.ConsumerGroup("s"), kgo.ConsumeTopics("s"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.CommitRecords(ctx, &kgo.Record{Topic: "s", Partition: 0, Offset: 0}); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	answered, closed := 0, 0
	for _, s := range seeds {
		if acksZeroProduce(s.frame) {
			// No answer comes to acks=0; the broker must go on.
			_ = sendOneFrame(addr, s.frame)
			continue
		}
		switch err := serveOneFrame(addr, s.frame); {
		case err == nil:
			answered++
		case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isConnReset(err):
			closed++
		default:
			t.Errorf("%s: %v", s.name, err)
		}
	}
	t.Logf("%d requests: %d answered, %d connections closed by the broker", len(seeds), answered, closed)
	for _, b := range brokers {
		if log := b.LogTail(64 << 20); strings.Contains(log, "panicked") {
			var lines []string
			for _, l := range strings.Split(log, "\n") {
				if strings.Contains(l, "panicked") {
					lines = append(lines, l)
				}
			}
			t.Errorf("handlers panicked on %s:\n%s", b.Addr, strings.Join(lines, "\n"))
		}
		if exited, how := b.Exited(); exited {
			t.Errorf("broker %s exited: %s", b.Addr, how)
		}
	}
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "after"); err != nil {
		t.Fatal(err)
	}
	fresh := newClient(t, kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("after"))
	if err := fresh.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("a fresh client after the requests: %v", err)
	}
}

// mutatedRequests is how many mutated seeds the "mutated" case sends.
const mutatedRequests = 3000

type fuzzSeed struct {
	name  string
	frame []byte
}

// fuzzSeeds reads protocol's committed FuzzDecodeRequest corpus: one
// filled request frame (header and body, no length prefix) per served
// key and version, in name order.
func fuzzSeeds(t *testing.T) []fuzzSeed {
	t.Helper()
	dir := filepath.Join("..", "protocol", "testdata", "fuzz", "FuzzDecodeRequest")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []fuzzSeed
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		// "go test fuzz v1\n[]byte(\"...\")\n"
		_, rest, ok := strings.Cut(string(data), "\n")
		rest = strings.TrimSpace(rest)
		if !ok || !strings.HasPrefix(rest, "[]byte(") || !strings.HasSuffix(rest, ")") {
			t.Fatalf("seed %s: not a fuzz corpus file", e.Name())
		}
		frame, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(rest, "[]byte("), ")"))
		if err != nil {
			t.Fatalf("seed %s: %v", e.Name(), err)
		}
		out = append(out, fuzzSeed{e.Name(), []byte(frame)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	if len(out) < 100 {
		t.Fatalf("only %d seeds in %s", len(out), dir)
	}
	return out
}

// acksZeroProduce reports whether frame is a Produce request that decodes
// with acks 0 (not answered).
func acksZeroProduce(frame []byte) bool {
	if len(frame) < 10 || binary.BigEndian.Uint16(frame) != 0 {
		return false
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	n := int(int16(binary.BigEndian.Uint16(frame[8:])))
	at := 10 + max(n, 0)
	if req.IsFlexible() {
		at++ // the header's tagged fields: none in the seeds
	}
	if at > len(frame) || req.ReadFrom(frame[at:]) != nil {
		return false
	}
	return req.Acks == 0
}

// sendOneFrame sends frame on a new connection and closes it.
func sendOneFrame(addr string, frame []byte) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
	return err
}

// serveOneFrame sends frame on a new connection and reads one response
// whose correlation id matches the request's; nil when it came, io.EOF
// or a reset when the broker closed the connection instead.
func serveOneFrame(addr string, frame []byte) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		return err
	}
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
	if _, err := c.Write(append(msg, frame...)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	resp := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, resp); err != nil {
		return err
	}
	if len(resp) < 4 || !bytes.Equal(resp[:4], frame[4:8]) {
		return errors.New("response with another correlation id")
	}
	return nil
}

func isConnReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}
