package bufpool

import "testing"

func TestClasses(t *testing.T) {
	for _, tc := range []struct{ size, class, classSize int }{
		{0, -1, 0}, {16<<10 - 1, -1, 0}, {16 << 10, 0, 16 << 10}, {16<<10 + 1, 1, 20 << 10},
		{32 << 10, 4, 32 << 10}, {200 << 10, 15, 224 << 10}, {16 << 20, 40, 16 << 20}, {16<<20 + 1, -1, 0},
	} {
		if got, n := Class(tc.size), ClassSize(tc.size); got != tc.class || n != tc.classSize {
			t.Errorf("Class(%d) = %d size %d, want %d size %d", tc.size, got, n, tc.class, tc.classSize)
		}
	}
	// Every pooled size gets a buffer less than a quarter larger, and the
	// classes are in order of size.
	last := 0
	for size := 16 << 10; size <= 16<<20; size += 1 + size/97 {
		n := ClassSize(size)
		if n < size || 4*(n-size) >= size || Class(size) < last {
			t.Fatalf("size %d: class %d of %d bytes", size, Class(size), n)
		}
		if Class(n) != Class(size) || ClassSize(n) != n {
			t.Fatalf("size %d: its class size %d is in another class", size, n)
		}
		last = Class(size)
	}
	var p Pool
	for _, size := range []int{16 << 10, 100 << 10, 1 << 20, 16 << 20} {
		b := p.Get(size)
		if len(*b) != ClassSize(size) || cap(*b) != len(*b) || Class(cap(*b)) != Class(size) {
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
