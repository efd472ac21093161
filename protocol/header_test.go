package protocol

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeRequest frames a kmsg request the way a client does (without the
// length prefix).
func encodeRequest(req kmsg.Request, corr int32, clientID string) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func TestParseHeader(t *testing.T) {
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(7)
	cases := []struct {
		name    string
		frame   []byte
		key     int16
		client  string
		wantErr error
	}{
		{"flexible metadata", encodeRequest(meta, 7, "cli"), 3, "cli", nil},
		{"non-flexible produce", encodeRequest(produce, 9, ""), 0, "", nil},
		{"too short", []byte{0, 3, 0}, 0, "", ErrMalformed},
		{"client id past end", []byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 50, 'a'}, 0, "", ErrMalformed},
		{"unknown key", []byte{0x7f, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff}, 0x7f00, "", ErrUnknownKey},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, _, err := ParseHeader(c.frame)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err %v, want %v", err, c.wantErr)
			}
			if c.wantErr == nil && (h.Key != c.key || h.ClientID != c.client) {
				t.Fatalf("header %+v", h)
			}
		})
	}
}

func TestDecodeRejectsUnservedVersions(t *testing.T) {
	s := &Server{}
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(2)
	h, body, err := ParseHeader(encodeRequest(produce, 1, "x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode(h, body); err == nil {
		t.Fatal("produce v2 decoded; want refusal (v3 is the oldest served)")
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(99)
	frame := encodeRequest(av, 1, "x")
	h, body, _ = ParseHeader(frame)
	if _, err := s.Decode(h, body); err != nil {
		t.Fatalf("ApiVersions v99 must be answered (with UNSUPPORTED_VERSION): %v", err)
	}
}

// FuzzParseHeader feeds arbitrary frames through header parsing and body
// decoding: nothing may panic.
func FuzzParseHeader(f *testing.F) {
	for _, k := range ServedKeys() {
		req := kmsg.RequestForKey(k)
		_, max, _ := VersionRange(k)
		req.SetVersion(max)
		f.Add(encodeRequest(req, 1, "seed"))
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0xff})
	s := &Server{}
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, body, err := ParseHeader(frame)
		if err != nil {
			return
		}
		_, _ = s.Decode(h, body)
	})
}
