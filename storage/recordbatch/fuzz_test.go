package recordbatch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// seedBatches gives the fuzzers valid batches of every codec to mutate.
func seedBatches(f *testing.F) [][]byte {
	var out [][]byte
	for _, codec := range codecs {
		for _, n := range []int{0, 1, 4} {
			b, err := Build(sampleHeader(codec), sampleRecords(n))
			if err != nil {
				f.Fatal(err)
			}
			out = append(out, b)
		}
	}
	return out
}

func FuzzValidate(f *testing.F) {
	for _, b := range seedBatches(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Validate(b)
		if err != nil {
			return
		}
		if h.TotalSize() != len(b) || h.Magic != 2 || h.NumRecords < 0 || h.LastOffsetDelta < 0 {
			t.Fatalf("Validate accepted inconsistent header %+v for %d bytes", h, len(b))
		}
		// Patching broker-owned fields must keep a valid batch valid.
		c := bytes.Clone(b)
		SetBaseOffset(c, 12345)
		SetPartitionLeaderEpoch(c, 9)
		SetLogAppendTime(c, 99)
		if _, err := Validate(c); err != nil {
			t.Fatalf("patched batch invalid: %v", err)
		}
	})
}

func FuzzSplit(f *testing.F) {
	seeds := seedBatches(f)
	f.Add(bytes.Join(seeds, nil))
	f.Add(seeds[0])
	f.Fuzz(func(t *testing.T, b []byte) {
		batches, err := Split(b)
		if err != nil {
			return
		}
		total := 0
		for _, one := range batches {
			total += len(one)
		}
		if total != len(b) {
			t.Fatalf("Split covered %d of %d bytes", total, len(b))
		}
	})
}

func FuzzRecords(f *testing.F) {
	for _, b := range seedBatches(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Repair length, magic and CRC so mutations reach the record decoder
		// and decompressors instead of stopping at the checksum.
		if len(b) >= HeaderSize {
			b = bytes.Clone(b)
			binary.BigEndian.PutUint32(b[lengthOffset:], uint32(len(b)-logOverhead))
			b[magicOffset] = 2
			binary.BigEndian.PutUint32(b[crcOffset:], checksum(b))
		}
		recs, err := Records(b)
		if err != nil {
			return
		}
		// Whatever decodes must re-encode (uncompressed) to the same records.
		h, _ := ParseHeader(b)
		h.Attributes &^= AttrCompressionMask
		nb, err := Build(h, recs)
		if err != nil {
			t.Fatalf("re-Build of decoded records: %v", err)
		}
		again, err := Records(nb)
		if err != nil {
			t.Fatalf("Records of re-built batch: %v", err)
		}
		if len(again) != len(recs) {
			t.Fatalf("re-built batch has %d records, want %d", len(again), len(recs))
		}
		for i := range recs {
			if !bytes.Equal(again[i].Key, recs[i].Key) || !bytes.Equal(again[i].Value, recs[i].Value) ||
				again[i].OffsetDelta != recs[i].OffsetDelta || again[i].ValueNull != recs[i].ValueNull {
				t.Fatalf("record %d changed in re-encode", i)
			}
		}
	})
}

// FuzzEach checks the streaming iteration against Records, the decoder that
// holds the whole decompressed section: whatever Each accepts, Records
// accepts with the same records, and for uncompressed batches the reverse.
// (Records is only asked about what Each accepted within 1 MiB: a mutated
// compressed batch may inflate to Records' 256 MiB and stall the fuzzer.)
// ValidateProduce must never panic.
func FuzzEach(f *testing.F) {
	for _, b := range seedBatches(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= HeaderSize {
			b = bytes.Clone(b)
			binary.BigEndian.PutUint32(b[lengthOffset:], uint32(len(b)-logOverhead))
			b[magicOffset] = 2
			binary.BigEndian.PutUint32(b[crcOffset:], checksum(b))
		}
		_ = ValidateProduce(b, ProduceOptions{MaxDecompressedBytes: 1 << 20, RequireKeys: true})
		h, err := Validate(b)
		if err != nil {
			return
		}
		var got []Record
		eachErr := Each(b, IterOptions{MaxBytes: 1 << 20}, func(_ int32, r *Record) error {
			c := *r
			c.Key, c.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
			c.Headers = nil
			for _, h := range r.Headers {
				c.Headers = append(c.Headers, RecordHeader{Key: h.Key, Value: bytes.Clone(h.Value)})
			}
			got = append(got, c)
			return nil
		})
		if eachErr != nil && h.Compression() != CodecNone {
			return
		}
		want, recErr := Records(b)
		switch {
		case eachErr == nil && recErr != nil:
			t.Fatalf("Each accepted what Records refused: %v", recErr)
		case eachErr != nil && recErr == nil:
			t.Fatalf("Records accepted what Each refused: %v", eachErr)
		case eachErr == nil:
			equalRecords(t, got, want)
		}
	})
}

// corpusSeeds are the committed seeds of this package's fuzz targets:
// valid batches of every codec, batches whose header lies about their
// records, and small decompression bombs of every codec.
func corpusSeeds(t testing.TB) map[string][]byte {
	seeds := map[string][]byte{}
	for _, codec := range codecs {
		name := codecName(codec)
		for _, n := range []int{1, 4, 40} {
			seeds[fmt.Sprintf("valid_%s_%d", name, n)] = mustBuild(t, sampleHeader(codec), sampleRecords(n))
		}
		raw := rawRecords(sampleRecords(4))
		seeds["lie_more_"+name] = forge(t, codec, 9, 8, compressed(t, codec, raw))
		seeds["lie_fewer_"+name] = forge(t, codec, 2, 1, compressed(t, codec, raw))
		seeds["lie_1e9_"+name] = forge(t, codec, 1_000_000_000, 999_999_999, compressed(t, codec, raw))
		// Snappy inflates at most ~22x: its "bomb" would only be a big file.
		if codec != CodecNone && codec != CodecSnappy {
			seeds["bomb_"+name] = forge(t, codec, 1, 0, bombSection(t, codec, 1<<20))
		}
	}
	return seeds
}

var fuzzTargets = []string{"FuzzValidate", "FuzzSplit", "FuzzRecords", "FuzzEach"}

// decompresses says whether a target reads records (and so gets the bombs).
func decompresses(target string) bool { return target == "FuzzRecords" || target == "FuzzEach" }

// TestFuzzCorpus checks the committed corpus holds every seed of every
// target; REGENT_WRITE_FUZZ_CORPUS=1 rewrites it first.
func TestFuzzCorpus(t *testing.T) {
	seeds := corpusSeeds(t)
	for _, target := range fuzzTargets {
		dir := filepath.Join("testdata", "fuzz", target)
		if os.Getenv("REGENT_WRITE_FUZZ_CORPUS") != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, b := range seeds {
				if strings.HasPrefix(name, "bomb_") && !decompresses(target) {
					continue
				}
				data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name := range seeds {
			if strings.HasPrefix(name, "bomb_") && !decompresses(target) {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Errorf("%s: seed %s missing (regenerate the corpus): %v", target, name, err)
			}
		}
	}
}
