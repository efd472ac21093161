package hostile

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAppendRequestFramesEach checks that frames appended one after
// another each carry their own size (kmsg's formatter writes the size at
// the start of the slice it is given).
func TestAppendRequestFramesEach(t *testing.T) {
	var buf []byte
	for i := 0; i < 3; i++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		buf = AppendRequest(buf, req, int32(i))
	}
	r := bytes.NewReader(buf)
	for i := 0; i < 3; i++ {
		// A request frame reads like a response frame up to the
		// correlation id: size, then key and version in its place.
		_, rest, err := ReadResponse(r, 1<<10)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if corr := int32(rest[0])<<24 | int32(rest[1])<<16 | int32(rest[2])<<8 | int32(rest[3]); corr != int32(i) {
			t.Fatalf("frame %d has correlation id %d", i, corr)
		}
	}
	if r.Len() != 0 {
		t.Fatalf("%d bytes left", r.Len())
	}
}
