package protocol

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func initV6(t *testing.T, s *Server, id *string, enable2PC, keepPrepared bool) *initProducerIDResponse {
	t.Helper()
	req := new(initProducerIDRequest)
	req.Default()
	req.Version = 6
	req.TransactionalID, req.TransactionTimeoutMillis = id, 60_000
	req.Enable2PC, req.KeepPreparedTxn = enable2PC, keepPrepared
	return call[*initProducerIDResponse](t, s, req)
}

// TestInitProducerIDV6 (KIP-939): ordinary v6 requests are served as v5's,
// with no ongoing prepared transaction (-1/-1); enable2Pc is refused as
// Kafka 4.3 refuses it when 2PC is not enabled
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), keepPreparedTxn as Kafka 4.3
// always does (UNSUPPORTED_VERSION), and both are ignored for idempotent
// producers. ApiVersions advertises v6.
func TestInitProducerIDV6(t *testing.T) {
	s := txnServer(t)
	pids, err := OpenProducerIDs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.pids = pids // idempotent producers' ids (txnServer has none)
	id := "v6"
	r := initV6(t, s, &id, false, false)
	code(t, "ordinary v6", r.ErrorCode, nil)
	if r.ProducerID < 0 || r.ProducerEpoch != 0 || r.OngoingTxnProducerID != -1 || r.OngoingTxnProducerEpoch != -1 {
		t.Fatalf("ordinary v6: %+v", r)
	}
	again := initV6(t, s, &id, false, false)
	if again.ErrorCode != 0 || again.ProducerID != r.ProducerID || again.ProducerEpoch != 1 {
		t.Fatalf("second init: %+v, want producer %d epoch 1", again, r.ProducerID)
	}
	for _, c := range []struct {
		enable2PC, keep bool
		want            *kerr.Error
	}{{true, false, kerr.TransactionalIDAuthorizationFailed}, {false, true, kerr.UnsupportedVersion}, {true, true, kerr.TransactionalIDAuthorizationFailed}} {
		r := initV6(t, s, &id, c.enable2PC, c.keep)
		code(t, "2PC flags", r.ErrorCode, c.want)
		if r.ProducerID != -1 || r.ProducerEpoch != -1 || r.OngoingTxnProducerID != -1 || r.OngoingTxnProducerEpoch != -1 {
			t.Fatalf("refused: %+v", r)
		}
	}
	// The refusals changed nothing: the next init bumps the epoch once.
	if r := initV6(t, s, &id, false, false); r.ErrorCode != 0 || r.ProducerEpoch != 2 {
		t.Fatalf("init after refusals: %+v, want epoch 2", r)
	}
	if r := initV6(t, s, nil, true, true); r.ErrorCode != 0 || r.ProducerID < 0 || r.ProducerEpoch != 0 {
		t.Fatalf("idempotent v6 with both flags: %+v", r)
	}
	av := call[*kmsg.ApiVersionsResponse](t, s, &kmsg.ApiVersionsRequest{Version: 2})
	advertised := false
	for _, k := range av.ApiKeys {
		if k.ApiKey == 22 {
			advertised = k.MaxVersion == 6
		}
	}
	if !advertised {
		t.Fatalf("InitProducerId v6 not advertised: %+v", av.ApiKeys)
	}
}

// TestInitProducerIDV6Wire checks the v6 encodings byte by byte against
// Kafka's message definitions: the request's two flags after the producer
// epoch, the response's ongoing producer id and epoch after the epoch,
// each followed by an empty tagged-field section.
func TestInitProducerIDV6Wire(t *testing.T) {
	id := "tx"
	req := new(initProducerIDRequest)
	req.Version = 6
	req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, 1000, 7, 3
	req.Enable2PC, req.KeepPreparedTxn = true, false
	want := []byte{3, 't', 'x'} // compact string: length+1
	want = binary.BigEndian.AppendUint32(want, 1000)
	want = binary.BigEndian.AppendUint64(want, 7)
	want = binary.BigEndian.AppendUint16(want, 3)
	want = append(want, 1, 0, 0)
	got := req.AppendTo(nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("request %x, want %x", got, want)
	}
	back := new(initProducerIDRequest)
	back.Version = 6
	if err := back.ReadFrom(got); err != nil || *back.TransactionalID != id || back.ProducerEpoch != 3 || !back.Enable2PC || back.KeepPreparedTxn {
		t.Fatalf("decoded %+v (%v)", back, err)
	}
	if err := back.ReadFrom(got[:len(got)-2]); err == nil {
		t.Fatal("a request cut before its flags decoded")
	}

	resp := req.ResponseKind().(*initProducerIDResponse)
	resp.ThrottleMillis, resp.ProducerID, resp.ProducerEpoch = 0, 9, 1
	want = binary.BigEndian.AppendUint32(nil, 0)
	want = binary.BigEndian.AppendUint16(want, 0)
	want = binary.BigEndian.AppendUint64(want, 9)
	want = binary.BigEndian.AppendUint16(want, 1)
	want = binary.BigEndian.AppendUint64(want, 0xffffffffffffffff)
	want = binary.BigEndian.AppendUint16(want, 0xffff)
	want = append(want, 0)
	if got := resp.AppendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("response %x, want %x", got, want)
	}
}
