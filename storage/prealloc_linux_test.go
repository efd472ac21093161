package storage

import (
	"syscall"
	"testing"
)

// allocated is the bytes of disk the file holds (st_blocks), which a
// KEEP_SIZE reservation raises past its size.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// roundBlock rounds n up to whole 4 KiB blocks.
func roundBlock(n int64) int64 { return (n + 4095) / 4096 * 4096 }

// metaSlack allows for blocks st_blocks counts besides data: an ext4
// extent tree that outgrew the inode (a reserved range written in pieces
// splits into several extents) takes a block of its own. Seen once: a
// rolled segment one block over its data.
const metaSlack = 4 * 4096

// TestAppendsReserveAheadAndRollReleases: the active segment holds blocks
// past its end, at most an eighth of its size or 1 MiB, while its size
// stays what was written; a rolled segment gives them back; a crash with
// blocks reserved loses nothing and appends go on at the right place.
func TestAppendsReserveAheadAndRollReleases(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 6 << 20, IndexIntervalBytes: 4096}
	l := openLog(t, dir, opts)
	b := simpleBatch(t, 16, 4000, 1) // about 64 KiB
	for range 40 {
		mustAppend(t, l, b)
	}
	seg := lastSegmentLog(t, dir)
	size := fileSizeOf(t, seg)
	if size != l.Size() {
		t.Fatalf("segment file size %d, log size %d: the reservation changed the size", size, l.Size())
	}
	alloc := allocated(t, seg)
	if alloc <= roundBlock(size)+metaSlack || alloc > size+min(size/8, maxReserveAhead)+4096+metaSlack {
		t.Fatalf("%d bytes allocated for %d written: want more, by at most an eighth", alloc, size)
	}

	for l.NextOffset() < 16*200 && len(segmentFiles(t, dir, logSuffix)) < 2 {
		mustAppend(t, l, b)
	}
	files := segmentFiles(t, dir, logSuffix)
	if len(files) < 2 {
		t.Fatal("no roll")
	}
	rolled := files[0]
	if rs, ra := fileSizeOf(t, rolled), allocated(t, rolled); ra > roundBlock(rs)+metaSlack {
		t.Fatalf("rolled segment: %d bytes allocated for %d written", ra, rs)
	}

	for range 5 {
		mustAppend(t, l, b)
	}
	next, total := l.NextOffset(), l.Size()
	crashLog(l) // blocks still reserved past the active segment's end
	if a, s := allocated(t, lastSegmentLog(t, dir)), fileSizeOf(t, lastSegmentLog(t, dir)); a <= roundBlock(s)+metaSlack {
		t.Fatalf("active segment: %d allocated for %d written, want a reservation left at the crash", a, s)
	}

	l = openLog(t, dir, opts)
	defer l.Close()
	if l.NextOffset() != next || l.Size() != total {
		t.Fatalf("after recovery next %d size %d, want %d %d", l.NextOffset(), l.Size(), next, total)
	}
	if got := readAll(t, l, 0); int64(len(got)) != next {
		t.Fatalf("read %d records, want %d", len(got), next)
	}
	if base, _ := mustAppend(t, l, b); base != next {
		t.Fatalf("append after recovery at %d, want %d", base, next)
	}
	if got := readAll(t, l, next); len(got) != 16 {
		t.Fatalf("read %d records of the append after recovery, want 16", len(got))
	}
}

// TestNoReserve: a log fsynced after every append reserves nothing ahead.
func TestNoReserve(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 6 << 20, IndexIntervalBytes: 4096, NoReserve: true})
	defer l.Close()
	b := simpleBatch(t, 16, 4000, 1)
	for range 40 {
		mustAppend(t, l, b)
	}
	seg := lastSegmentLog(t, dir)
	if s, a := fileSizeOf(t, seg), allocated(t, seg); a > roundBlock(s)+metaSlack {
		t.Fatalf("%d bytes allocated for %d written with NoReserve", a, s)
	}
}
