package topics

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/storage"
)

// TestCreateOutOfDescriptorsLeavesNothing is the failure seen creating
// 100,000 partitions: descriptors run out part way through a create. With a
// file cache larger than the process's descriptor limit, the create fails
// with KAFKA_STORAGE_ERROR and no partition directory of the topic stays
// behind, including the one whose open failed half way. With the cache
// below the limit, the same create under the same limit succeeds: the
// partition count no longer depends on the descriptor limit.
func TestCreateOutOfDescriptorsLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	r := open(t, dir)
	defer r.Close()
	t.Cleanup(func() { storage.SetMaxOpenFiles(storage.DefaultMaxOpenFiles) })
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// Room for a few partitions' files, then EMFILE.
	low := old
	low.Cur = uint64(len(fds) + 40)
	if low.Cur >= old.Cur {
		t.Skipf("RLIMIT_NOFILE %d too low to lower", old.Cur)
	}
	createUnderLimit := func(name string) error {
		t.Helper()
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
			t.Skipf("cannot lower RLIMIT_NOFILE: %v", err)
		}
		_, cerr := r.Create(CreateSpec{Name: name, Partitions: 100, ReplicationFactor: 1})
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Fatal(err)
		}
		return cerr
	}

	storage.SetMaxOpenFiles(1024)
	if err := createUnderLimit("many"); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("create with descriptors running out: %v", err)
	}
	if r.Get("many") != nil {
		t.Fatal("failed create registered the topic")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "many-*")); len(m) != 0 {
		t.Fatalf("failed create left %d partition directories, e.g. %s", len(m), m[0])
	}

	storage.SetMaxOpenFiles(16)
	if err := createUnderLimit("many"); err != nil {
		t.Fatalf("create of 100 partitions through a 16-descriptor cache: %v", err)
	}
	if got := len(r.Get("many").Partitions); got != 100 {
		t.Fatalf("created %d partitions", got)
	}
}
