package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/features"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// txnBatch is a one-record transactional batch of producer pid/epoch.
func txnBatch(t *testing.T, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	b, err := recordbatch.Build(recordbatch.Header{Attributes: recordbatch.AttrTransactional, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, []recordbatch.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func txnProduce(t *testing.T, s *Server, version int16, txnID *string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 5000, txnID
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return call[*kmsg.ProduceResponse](t, s, req).Topics[0].Partitions[0]
}

func initTxn(t *testing.T, s *Server, id string) (int64, int16) {
	t.Helper()
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version = 4
	ip.TransactionalID = kmsg.StringPtr(id)
	ip.TransactionTimeoutMillis = 60_000
	ir := call[*kmsg.InitProducerIDResponse](t, s, ip)
	code(t, "init producer id", ir.ErrorCode, nil)
	return ir.ProducerID, ir.ProducerEpoch
}

// TestProduceVerifiesTransaction (KIP-890 part 1): a TV1 produce (v3-11)
// of a transactional batch to a partition never added to the transaction
// is refused with INVALID_TXN_STATE and nothing is written, so no hanging
// transaction can start; after AddPartitionsToTxn the same batch is taken;
// after the transaction ends the partition must be added again; a produce
// without a transactional id cannot carry transactional batches.
func TestProduceVerifiesTransaction(t *testing.T) {
	s := txnServer(t)
	id := "tv1"
	pid, epoch := initTxn(t, s, id)

	got := txnProduce(t, s, 11, &id, 0, txnBatch(t, pid, epoch, 0))
	code(t, "produce to a partition not in the transaction", got.ErrorCode, kerr.InvalidTxnState)
	if got.ErrorMessage == nil || *got.ErrorMessage != "Partition was not added to the transaction" {
		t.Fatalf("message %v", got.ErrorMessage)
	}
	if hw := s.topics.Get("t").Partitions[0].View().HighWatermark; hw != 0 {
		t.Fatalf("a refused batch was written: high watermark %d", hw)
	}

	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version = 3
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "t", []int32{0}
	add.Topics = append(add.Topics, at)
	ar := call[*kmsg.AddPartitionsToTxnResponse](t, s, add)
	code(t, "add partitions", ar.Topics[0].Partitions[0].ErrorCode, nil)

	got = txnProduce(t, s, 11, &id, 0, txnBatch(t, pid, epoch, 0))
	code(t, "produce after AddPartitionsToTxn", got.ErrorCode, nil)
	got = txnProduce(t, s, 11, &id, 1, txnBatch(t, pid, epoch, 0))
	code(t, "produce to another partition", got.ErrorCode, kerr.InvalidTxnState)
	got = txnProduce(t, s, 9, &id, 0, txnBatch(t, pid, epoch+1, 0))
	code(t, "produce with a newer epoch", got.ErrorCode, kerr.InvalidProducerEpoch)

	end := kmsg.NewPtrEndTxnRequest()
	end.Version = 4
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
	code(t, "end txn", call[*kmsg.EndTxnResponse](t, s, end).ErrorCode, nil)
	got = txnProduce(t, s, 11, &id, 0, txnBatch(t, pid, epoch, 1))
	code(t, "produce after the transaction ended", got.ErrorCode, kerr.InvalidTxnState)

	got = txnProduce(t, s, 11, nil, 0, txnBatch(t, pid, epoch, 1))
	code(t, "transactional batch without a transactional id", got.ErrorCode, kerr.TransactionalIDAuthorizationFailed)

	// Every batch of a partition's records is looked at: a transactional
	// batch behind a plain one is checked all the same.
	plain := buildBatch(t, recordbatch.CodecNone, []recordbatch.Record{{Value: []byte("p")}})
	got = txnProduce(t, s, 11, &id, 1, append(append([]byte(nil), plain...), txnBatch(t, pid, epoch, 0)...))
	code(t, "transactional batch behind a plain one", got.ErrorCode, kerr.InvalidTxnState)
	got = txnProduce(t, s, 11, &id, 1, append(txnBatch(t, pid, epoch, 0), txnBatch(t, pid+1, epoch, 0)...))
	code(t, "transactional batches of two producers", got.ErrorCode, kerr.InvalidProducerIDMapping)
	if hw := s.topics.Get("t").Partitions[1].View().HighWatermark; hw != 0 {
		t.Fatalf("refused batches were written to partition 1: high watermark %d", hw)
	}
	if st := s.txns.Stats(); st.VerifyRefused != 4 {
		t.Fatalf("stats %+v, want 4 refused", st)
	}
}

// TestProduceV12AddsPartitionImplicitly (KIP-890 part 2): a Produce v12+
// adds its partition to the transaction; EndTxn v5 commits it, bumps the
// epoch and answers it; the old epoch is then fenced.
func TestProduceV12AddsPartitionImplicitly(t *testing.T) {
	s := txnServer(t)
	id := "tv2"
	pid, epoch := initTxn(t, s, id)
	for p := range int32(2) {
		got := txnProduce(t, s, 12, &id, p, txnBatch(t, pid, epoch, 0))
		code(t, "implicit add", got.ErrorCode, nil)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.Version = 5
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
	er := call[*kmsg.EndTxnResponse](t, s, end)
	code(t, "end txn v5", er.ErrorCode, nil)
	if er.ProducerID != pid || er.ProducerEpoch != epoch+1 {
		t.Fatalf("EndTxn v5 answered %d/%d, want %d/%d", er.ProducerID, er.ProducerEpoch, pid, epoch+1)
	}
	// Both partitions got their commit marker: the last stable offset
	// passed them.
	for p := range 2 {
		if v := s.topics.Get("t").Partitions[p].View(); v.LastStable != 2 {
			t.Fatalf("partition %d: last stable %d, want 2 (record and marker)", p, v.LastStable)
		}
	}
	got := txnProduce(t, s, 12, &id, 0, txnBatch(t, pid, epoch, 1))
	code(t, "old epoch", got.ErrorCode, kerr.InvalidProducerEpoch)
	got = txnProduce(t, s, 12, &id, 2, txnBatch(t, pid, epoch+1, 0))
	code(t, "next transaction", got.ErrorCode, nil)
	if st := s.txns.Stats(); st.EndTxnV5 != 1 || st.ImplicitAdds != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestUpdateFeatures: Kafka's validation, validate_only and v0's
// AllowDowngrade; the change shows in the store.
func TestUpdateFeatures(t *testing.T) {
	s := groupServer(t)
	fs, err := features.Open(features.Options{DataDir: t.TempDir(), NodeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	s.SetFeatures(fs)
	update := func(version int16, validateOnly bool, name string, level int16, typ int8, allowDowngrade bool) *kmsg.UpdateFeaturesResponse {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		req.Version, req.ValidateOnly = version, validateOnly
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType, u.AllowDowngrade = name, level, typ, allowDowngrade
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		return call[*kmsg.UpdateFeaturesResponse](t, s, req)
	}
	r := update(2, false, "transaction.version", 3, 1, false)
	code(t, "level above range", r.ErrorCode, kerr.InvalidUpdateVersion)
	if r.ErrorMessage == nil || *r.ErrorMessage != "Invalid update version 3 for feature transaction.version. Local controller 1 only supports versions 0-2" {
		t.Fatalf("message %v", r.ErrorMessage)
	}
	code(t, "unknown feature", update(2, false, "eligible.leader.replicas.version", 1, 1, false).ErrorCode, kerr.InvalidUpdateVersion)
	code(t, "downgrade typed as upgrade", update(2, false, "transaction.version", 1, 1, false).ErrorCode, kerr.InvalidUpdateVersion)
	r = update(1, true, "transaction.version", 1, 2, false)
	code(t, "validate only", r.ErrorCode, nil)
	if len(r.Results) != 1 || r.Results[0].Feature != "transaction.version" || r.Results[0].ErrorCode != 0 {
		t.Fatalf("v1 results %+v", r.Results)
	}
	if f := fs.Finalized(); f.Level(features.TransactionVersion) != 2 || f.Epoch != 0 {
		t.Fatalf("validate_only changed %+v", f)
	}
	code(t, "v0 downgrade without AllowDowngrade", update(0, false, "transaction.version", 1, 0, false).ErrorCode, kerr.InvalidUpdateVersion)
	code(t, "v0 downgrade", update(0, false, "transaction.version", 1, 0, true).ErrorCode, nil)
	if f := fs.Finalized(); f.Level(features.TransactionVersion) != 1 || f.Epoch != 1 {
		t.Fatalf("after downgrade %+v", f)
	}
	code(t, "upgrade", update(2, false, "transaction.version", 2, 1, false).ErrorCode, nil)
	if f := fs.Finalized(); f.Level(features.TransactionVersion) != 2 || f.Epoch != 2 {
		t.Fatalf("after upgrade %+v", f)
	}
}
