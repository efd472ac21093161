package protocol

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// decodeCorpusDir holds FuzzDecodeRequest's committed seeds: one valid
// request per served key and version, written by
// REGENT_WRITE_FUZZ_CORPUS=1 go test ./protocol -run TestDecodeFuzzCorpus
const decodeCorpusDir = "testdata/fuzz/FuzzDecodeRequest"

// FuzzDecodeRequest feeds whole request frames (header and body) to the
// decoders the broker serves: parsing the header and decoding the body must
// never panic (the request's ReadFrom, kmsg's or one of requestTypes', is
// called directly, without the recover that Decode adds, so a decoder
// panic is found rather than hidden), and a
// request that decodes must re-encode to bytes that decode to the same
// encoding again.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0xff})
	// The committed corpus holds these too; adding them here keeps a key
	// served after the corpus was written exercised all the same.
	for _, frame := range servedSeeds(f) {
		f.Add(frame)
	}
	s := &Server{}
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, body, err := ParseHeader(frame)
		if err != nil {
			return
		}
		min, max, ok := VersionRange(h.Key)
		if !ok || h.Version < min || h.Version > max {
			_, _ = s.Decode(h, body) // refused (or ApiVersions at any version)
			return
		}
		msg := newRequest(h.Key, h.Version)
		if err := msg.ReadFrom(body); err != nil {
			if _, err2 := s.Decode(h, body); err2 == nil {
				t.Fatalf("%s v%d: kmsg refused the body (%v) but Decode accepted it", kmsg.NameForKey(h.Key), h.Version, err)
			}
			return
		}
		if _, err := s.Decode(h, body); err != nil {
			t.Fatalf("%s v%d: kmsg decoded the body but Decode refused it: %v", kmsg.NameForKey(h.Key), h.Version, err)
		}
		once := msg.AppendTo(nil)
		again := newRequest(h.Key, h.Version)
		if err := again.ReadFrom(once); err != nil {
			t.Fatalf("%s v%d: re-encoded request does not decode: %v", kmsg.NameForKey(h.Key), h.Version, err)
		}
		if twice := again.AppendTo(nil); !bytes.Equal(once, twice) {
			t.Fatalf("%s v%d: encoding not stable across a decode", kmsg.NameForKey(h.Key), h.Version)
		}
	})
}

// FuzzDecodeConsumerMetadata covers the one decoder of client bytes beyond
// the request itself: the group coordinator parses consumer-protocol
// subscriptions (JoinGroup protocol metadata) to answer OffsetDelete. Each
// input is tried at every version; nothing may panic.
func FuzzDecodeConsumerMetadata(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(b); err != nil {
			return
		}
		again := md.AppendTo(nil)
		var md2 kmsg.ConsumerMemberMetadata
		if err := md2.ReadFrom(again); err != nil {
			t.Fatalf("re-encoded metadata v%d does not decode: %v", md.Version, err)
		}
	})
}

// TestDecodeFuzzCorpus checks that each committed seed decodes and names
// the served keys and versions the corpus lacks (FuzzDecodeRequest adds
// generated seeds for those, so they are fuzzed all the same; regenerate
// to commit them). With REGENT_WRITE_FUZZ_CORPUS=1 it rewrites the corpus
// first.
func TestDecodeFuzzCorpus(t *testing.T) {
	if os.Getenv("REGENT_WRITE_FUZZ_CORPUS") != "" {
		if err := os.RemoveAll(decodeCorpusDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(decodeCorpusDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, frame := range servedSeeds(t) {
			writeSeed(t, decodeCorpusDir, name, frame)
		}
		if err := os.MkdirAll(metadataCorpusDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range metadataSeeds() {
			writeSeed(t, metadataCorpusDir, name, b)
		}
	}
	for name := range metadataSeeds() {
		if _, err := os.Stat(filepath.Join(metadataCorpusDir, name)); err != nil {
			t.Fatalf("seed %s missing (regenerate the corpus): %v", name, err)
		}
	}
	s := &Server{}
	var missing []string
	for name := range servedSeeds(t) {
		data, err := os.ReadFile(filepath.Join(decodeCorpusDir, name))
		if os.IsNotExist(err) {
			missing = append(missing, name)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitN(string(data), "\n", 3)
		if len(lines) < 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") {
			t.Fatalf("seed %s: not a fuzz corpus file", name)
		}
		q, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("seed %s: %v", name, err)
		}
		h, body, err := ParseHeader([]byte(q))
		if err != nil {
			t.Fatalf("seed %s: %v", name, err)
		}
		if _, err := s.Decode(h, body); err != nil {
			t.Fatalf("seed %s: %v", name, err)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		t.Logf("corpus lacks %d served key/version seeds (%s ...); commit them with REGENT_WRITE_FUZZ_CORPUS=1 go test ./protocol -run TestDecodeFuzzCorpus",
			len(missing), missing[0])
	}
}

const metadataCorpusDir = "testdata/fuzz/FuzzDecodeConsumerMetadata"

func writeSeed(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// metadataSeeds are consumer-protocol subscriptions of every version.
func metadataSeeds() map[string][]byte {
	seeds := map[string][]byte{}
	for v := int16(0); v <= 3; v++ {
		var md kmsg.ConsumerMemberMetadata
		fill(reflect.ValueOf(&md).Elem(), []byte("ab"), 0)
		md.Version = v
		seeds[fmt.Sprintf("metadata_v%d", v)] = md.AppendTo(nil)
	}
	return seeds
}

// servedSeeds encodes, for every served key and version, a request whose
// arrays hold one element and whose fields are set, keyed by a file name.
func servedSeeds(t testing.TB) map[string][]byte {
	t.Helper()
	batch, err := recordbatch.Build(recordbatch.Header{Attributes: int16(recordbatch.CodecNone), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]recordbatch.Record{{Key: []byte("k"), Value: []byte("v"), Headers: []recordbatch.RecordHeader{{Key: "h", Value: []byte("x")}}}})
	if err != nil {
		t.Fatal(err)
	}
	seeds := map[string][]byte{}
	for _, k := range ServedKeys() {
		min, max, _ := VersionRange(k)
		for v := min; v <= max; v++ {
			req := newRequest(k, v)
			fill(reflect.ValueOf(req).Elem(), batch, 0)
			seeds[fmt.Sprintf("%02d_%s_v%d", k, kmsg.NameForKey(k), v)] = encodeRequest(req, 1, "seed")
		}
	}
	return seeds
}

// fill sets every field of a kmsg struct to something non-default: arrays
// get one element, strings and bytes a short value (byte fields named
// Records a valid batch), numbers 1. Version fields and unknown tags stay.
func fill(v reflect.Value, batch []byte, depth int) {
	if depth > 6 {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Name == "Version" || f.Name == "UnknownTags" {
				continue
			}
			if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Uint8 {
				if f.Name == "Records" {
					v.Field(i).SetBytes(batch)
				} else {
					v.Field(i).SetBytes([]byte("ab"))
				}
				continue
			}
			fill(v.Field(i), batch, depth+1)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), batch, depth+1)
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), batch, depth+1)
		v.Set(p)
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fill(v.Index(i), batch, depth+1)
		}
	}
}
