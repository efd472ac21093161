package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// checkVarlong compares decoder.varlong on b with binary.Varint, which it
// must match exactly: the value, the bytes consumed, and failing (with
// ErrCorrupt, consuming nothing) where binary.Varint does.
func checkVarlong(t *testing.T, b []byte) {
	t.Helper()
	want, n := binary.Varint(b)
	d := decoder{b: b}
	got, err := d.varlong()
	if n <= 0 {
		if !errors.Is(err, ErrCorrupt) || len(d.b) != len(b) {
			t.Fatalf("% x: got %d, err %v, %d bytes left; want ErrCorrupt and nothing consumed", b, got, err, len(d.b))
		}
		return
	}
	if err != nil || got != want || len(d.b) != len(b)-n {
		t.Fatalf("% x: got %d, err %v, %d bytes left; want %d, %d left", b, got, err, len(d.b), want, len(b)-n)
	}
}

func TestDecoderVarlongMatchesVarint(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, -8193, 1 << 20, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64} {
		enc := binary.AppendVarint(nil, v)
		checkVarlong(t, enc)
		checkVarlong(t, append(enc, 0x05, 0x80)) // trailing bytes stay
		checkVarlong(t, enc[:len(enc)-1])        // truncated
	}
	for _, b := range [][]byte{
		nil,
		{0x80},                                   // truncated
		{0x80, 0x00},                             // non-minimal 0: binary.Varint accepts it
		{0xff, 0x7f},                             // largest two-byte
		{0x81, 0x80, 0x00},                       // non-minimal, three bytes
		bytes.Repeat([]byte{0xff}, 10),           // overflows 64 bits
		append(bytes.Repeat([]byte{0x80}, 9), 2), // overflows 64 bits
	} {
		checkVarlong(t, b)
	}
}

func FuzzDecoderVarlong(f *testing.F) {
	f.Add([]byte{0x80, 0x00})
	f.Add([]byte{0xff, 0x7f, 0x01})
	f.Add(bytes.Repeat([]byte{0xff}, 10))
	f.Fuzz(func(t *testing.T, b []byte) { checkVarlong(t, b) })
}
