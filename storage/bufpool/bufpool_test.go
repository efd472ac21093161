package bufpool

import "testing"

func TestClasses(t *testing.T) {
	for _, tc := range []struct{ size, class int }{
		{0, -1}, {16<<10 - 1, -1}, {16 << 10, 0}, {16<<10 + 1, 1}, {200 << 10, 4}, {16 << 20, 10}, {16<<20 + 1, -1},
	} {
		if got := Class(tc.size); got != tc.class {
			t.Errorf("Class(%d) = %d, want %d", tc.size, got, tc.class)
		}
	}
	var p Pool
	for _, size := range []int{16 << 10, 100 << 10, 1 << 20, 16 << 20} {
		b := p.Get(size)
		if len(*b) < size || cap(*b) != len(*b) || Class(cap(*b)) != Class(size) {
			t.Errorf("Get(%d): len %d cap %d", size, len(*b), cap(*b))
		}
		*b = (*b)[:10] // a user's reslice: Put restores the whole buffer
		p.Put(b)
		if b2 := p.Get(size); len(*b2) < size {
			t.Errorf("Get(%d) after Put: len %d", size, len(*b2))
		}
	}
	if p.Get(8<<10) != nil {
		t.Error("a small buffer was pooled")
	}
	odd := make([]byte, 100<<10)
	p.Put(&odd) // not one of Get's: ignored
	p.Put(nil)
}
