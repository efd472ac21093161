//go:build linux

package interop_test

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestDiskFullRoomFromDeletion: on a disk with no byte left, an operator
// gives it room with Kafka's own requests. Deleting a topic and deleting
// records each need one small write (the topic registry; a log-start
// checkpoint) before any segment can go; the broker makes it with its disk
// reserve (--disk-reserve), then takes the stalled producer's records again
// once the reserve is back. Nothing acknowledged is lost, before or after a
// restart. Without the reserve both requests failed with
// KAFKA_STORAGE_ERROR and the disk stayed full.
func TestDiskFullRoomFromDeletion(t *testing.T) {
	const (
		valueBytes   = 16 << 10
		ballastRecs  = 1200 // ~19 MiB
		mainRecs     = 1600 // ~25 MiB
		partitions   = 3
		reserveBytes = 8 << 20
	)
	dir := smallDisk(t, "48m")
	data := filepath.Join(dir, "data")
	b := brokertest.StartIn(t, data, fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t)))
	reserve := filepath.Join(data, "meta", "disk-reserve")
	reserveHeld := func() bool { st, err := os.Stat(reserve); return err == nil && st.Size() == reserveBytes }
	testwait.For(t, "the disk reserve", 10*time.Second, reserveHeld)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	newClient := clientsOf(t, b.Addr)
	admCl := newClient()
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	value := func(prefix string, i int) string {
		pad := make([]byte, valueBytes/2)
		_, _ = crand.Read(pad)
		return fmt.Sprintf("%s-%06d-%s", prefix, i, hex.EncodeToString(pad))
	}

	// A topic the operator can do without, filling part of the disk.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "ballast"); err != nil {
		t.Fatalf("create ballast: %v", err)
	}
	bl := newClient(kgo.DefaultProduceTopic("ballast"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := range ballastRecs {
		if err := bl.ProduceSync(ctx, &kgo.Record{Value: []byte(value("ballast", i))}).FirstErr(); err != nil {
			t.Fatalf("produce ballast %d: %v", i, err)
		}
	}
	bl.Close()

	// The topic that fills the rest; small segments, so that DeleteRecords
	// has whole segments to remove.
	const topic = "disk-room"
	seg := "1048576"
	if _, err := adm.CreateTopic(ctx, partitions, 1, map[string]*string{"segment.bytes": &seg}, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	cl := newClient(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordDeliveryTimeout(2*time.Minute))
	defer cl.Close()
	var got ackLog
	for i := range mainRecs {
		cl.Produce(ctx, &kgo.Record{Partition: int32(i % partitions), Value: []byte(value("rec", i))}, got.add)
	}
	testwait.For(t, "the broker to log that its storage refused appends", time.Minute, func() bool {
		return strings.Contains(b.LogTail(1<<20), "append failed on this node's storage")
	})
	// Not a byte left, not even for a small file.
	fillDisk(t, dir, "filler-1")
	stalled, _ := got.get()

	// kafka-topics --delete.
	resp, err := adm.DeleteTopics(ctx, "ballast")
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete a topic with the disk full: %v", err)
	}
	// Usually through the reserve; the producer's refused appends give
	// back their partial writes, so now and then the registry's write
	// finds a page free by itself.
	t.Logf("the topic's deletion used the reserve (as logged so far): %v", strings.Contains(b.LogTail(1<<20), `for="deleting topic ballast"`))
	testwait.For(t, "the reserve to be made again", 20*time.Second, reserveHeld)
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	all, errs := got.get()
	t.Logf("%d of %d records acknowledged when the disk filled, all %d once a topic was deleted (errors seen: %v)", len(stalled), mainRecs, len(all), errs)
	if len(all) != mainRecs {
		t.Fatalf("%d of %d records acknowledged after the deletion", len(all), mainRecs)
	}

	// Full again: kafka-delete-records.
	fillDisk(t, dir, "filler-2")
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	before := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		before.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset / 2})
	})
	dr, err := adm.DeleteRecords(ctx, before)
	if err == nil {
		err = dr.Error()
	}
	if err != nil {
		t.Fatalf("delete records with the disk full: %v", err)
	}
	// Nothing else writes now: the checkpoints cannot be made without it.
	testwait.For(t, "the broker to log the reserve's use for a log start", 10*time.Second, func() bool {
		return strings.Contains(b.LogTail(1<<20), `released the disk reserve so that a write freeing space can be made; appends are refused until the reserve is made again, once there is room" for="moving the log start of`)
	})
	testwait.For(t, "the reserve to be made again", 20*time.Second, reserveHeld)

	// What is left is what was acknowledged, from the new log start.
	var kept []acked
	for _, a := range all {
		if o, ok := before.Lookup(topic, a.partition); ok && a.offset >= o.At {
			kept = append(kept, a)
		}
	}
	verifyAcked(t, "after deleting records", readLogWith(t, ctx, newClient, topic, partitions), kept)
	b.Kill()
	b.Restart()
	verifyAcked(t, "after a restart", readLogWith(t, ctx, newClient, topic, partitions), kept)
}

// fillDisk writes a file named name in dir until the file system has not
// a byte left.
func fillDisk(t *testing.T, dir, name string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("create filler: %v", err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill the disk: %v", err)
				}
				break
			}
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil && st.Bavail != 0 {
		t.Logf("filled the disk: %d blocks still free", st.Bavail)
	}
}
