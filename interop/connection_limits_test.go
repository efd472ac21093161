package interop_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestConnectionLimitsFromKafkaConfigs: max.connections.per.ip and its
// overrides are dynamic broker configs, as in Kafka: set, changed and
// deleted with AlterConfigs (what kafka-configs --entity-type brokers
// --entity-default sends), described as dynamic, applied to the
// connections accepted after each change, refused in the one combination
// Kafka refuses (0 without overrides), and kept across a restart.
// Each probe comes from an address of its own (127.0.0.2 and up), as the
// broker forgets closed connections a moment after they close; the admin
// client's own, from 127.0.0.1, are given room by an override.
func TestConnectionLimitsFromKafkaConfigs(t *testing.T) {
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	newClient := clientsOf(t, b.Addr)
	admCl := newClient()
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	alter := func(ops ...kadm.AlterConfig) error {
		t.Helper()
		rs, err := adm.AlterBrokerConfigs(ctx, ops)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Err != nil {
				return r.Err
			}
		}
		return nil
	}
	set := func(k, v string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)}
	}
	del := func(k string) kadm.AlterConfig { return kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k} }
	probe := func(from string, upTo int) int {
		t.Helper()
		return servedConnections(t, b.Addr, from, upTo)
	}

	if n := probe("127.0.0.2", 5); n != 5 {
		t.Fatalf("unbounded: %d of 5 connections served", n)
	}
	if err := alter(set("max.connections.per.ip", "2"), set("max.connections.per.ip.overrides", "127.0.0.1:1000")); err != nil {
		t.Fatalf("set max.connections.per.ip: %v", err)
	}
	rc, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rc {
		for _, c := range r.Configs {
			if c.Key == "max.connections.per.ip" {
				found = true
				if c.MaybeValue() != "2" || c.Source.String() != "DYNAMIC_DEFAULT_BROKER_CONFIG" {
					t.Errorf("described max.connections.per.ip = %q from %s, want 2 from DYNAMIC_DEFAULT_BROKER_CONFIG", c.MaybeValue(), c.Source)
				}
			}
		}
	}
	if !found {
		t.Error("DescribeConfigs has no max.connections.per.ip")
	}
	if n := probe("127.0.0.3", 5); n != 2 {
		t.Fatalf("max.connections.per.ip=2: %d connections served, want 2", n)
	}
	if err := alter(set("max.connections.per.ip.overrides", "127.0.0.1:1000,127.0.0.4:4")); err != nil {
		t.Fatalf("set overrides: %v", err)
	}
	if n := probe("127.0.0.4", 6); n != 4 {
		t.Fatalf("override 127.0.0.4:4: %d connections served, want 4", n)
	}
	if err := alter(set("max.connections.per.ip", "0"), set("max.connections.per.ip.overrides", "127.0.0.1:1000,127.0.0.5:4")); err != nil {
		t.Fatalf("max.connections.per.ip=0 with overrides: %v", err)
	}
	if n := probe("127.0.0.6", 2); n != 0 {
		t.Fatalf("max.connections.per.ip=0: %d connections served from an address no override names", n)
	}
	if n := probe("127.0.0.5", 6); n != 4 {
		t.Fatalf("max.connections.per.ip=0, override 127.0.0.5:4: %d connections served, want 4", n)
	}
	// Kafka refuses 0 without overrides: it would lock every client out.
	if err := alter(del("max.connections.per.ip.overrides")); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("deleting the overrides under max.connections.per.ip=0: %v, want INVALID_CONFIG", err)
	}
	if err := alter(set("max.connections.per.ip.overrides", "broker.example:3")); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("a host name in the overrides: %v, want INVALID_CONFIG", err)
	}
	if err := alter(set("max.connections.per.ip", "1")); err != nil {
		t.Fatal(err)
	}
	// Kept across a restart.
	b.Kill()
	b.Restart()
	if n := probe("127.0.0.5", 6); n != 4 {
		t.Fatalf("after a restart, override 127.0.0.5:4: %d connections served", n)
	}
	if n := probe("127.0.0.7", 3); n != 1 {
		t.Fatalf("after a restart, max.connections.per.ip=1: %d connections served", n)
	}
	if err := alter(del("max.connections.per.ip"), del("max.connections.per.ip.overrides")); err != nil {
		t.Fatalf("delete both: %v", err)
	}
	if n := probe("127.0.0.8", 6); n != 6 {
		t.Fatalf("bounds deleted: %d of 6 connections served", n)
	}
}

// servedConnections opens up to upTo connections to addr from the local
// address from, each asked for ApiVersions, and stops at the first one
// the broker closes unanswered; it returns how many were answered and
// closes them all.
func servedConnections(t *testing.T, addr, from string, upTo int) int {
	t.Helper()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	for i := range upTo {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial from %s: %v", from, err)
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		// ApiVersions v0: key 18, version 0, correlation i, no client id.
		req := binary.BigEndian.AppendUint32(nil, 10)
		req = binary.BigEndian.AppendUint16(req, 18)
		req = binary.BigEndian.AppendUint16(req, 0)
		req = binary.BigEndian.AppendUint32(req, uint32(i))
		req = binary.BigEndian.AppendUint16(req, 0xffff)
		if _, err := c.Write(req); err != nil {
			return i
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("connection %d from %s neither answered nor closed", i, from)
			}
			return i
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
			t.Fatalf("connection %d from %s: the answer broke off: %v", i, from, err)
		}
	}
	return upTo
}

// TestClusterConnectionLimits: a connection bound set through one node
// reaches every node (a replicated broker config), which applies it to
// the connections it accepts next.
func TestClusterConnectionLimits(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admCl := clientsOf(t, c.Node(2).Addr)()
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "max.connections.per.ip", Value: kadm.StringPtr("2")},
		{Op: kadm.SetConfig, Name: "max.connections.per.ip.overrides", Value: kadm.StringPtr("127.0.0.1:1000")},
	})
	if err == nil {
		for _, r := range rs {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		t.Fatalf("set max.connections.per.ip through node 2: %v", err)
	}
	for i, n := range c.Nodes() {
		// Each node applies it once its state reaches the change: until
		// then a probe (from an address of its own each time) gets more.
		from := 10 + i*20
		testwait.For(t, fmt.Sprintf("node %d to bound connections per address", n.ID), 30*time.Second, func() bool {
			from++
			return servedConnections(t, n.Addr, fmt.Sprintf("127.0.1.%d", from), 4) == 2
		})
	}
}
