package recordbatch

import (
	"bytes"
	"encoding/binary"
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
