package interop_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/regent-broker/regent/interop/brokertest"
)

// needTool finds an external client. Under CI it must be present (the
// project installs it); elsewhere a missing tool skips, saying so.
func needTool(t *testing.T, path string) string {
	t.Helper()
	p, err := exec.LookPath(path)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed; .ci/install-deps installs it", path)
		}
		t.Skipf("%s is not installed (run .ci/install-deps)", path)
	}
	return p
}

func TestKcatRoundTrip(t *testing.T) {
	kcat := needTool(t, "kcat")
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		topic := "kcat-" + codec
		var in bytes.Buffer
		for i := 0; i < 1000; i++ {
			fmt.Fprintf(&in, "%s-line-%d\n", codec, i)
		}
		prod := exec.CommandContext(ctx, kcat, "-b", b.Addr, "-t", topic, "-P", "-z", codec, "-X", "topic.partitioner=random")
		prod.Stdin = bytes.NewReader(in.Bytes())
		if out, err := prod.CombinedOutput(); err != nil {
			t.Fatalf("kcat produce %s: %v\n%s", codec, err, out)
		}
		cons := exec.CommandContext(ctx, kcat, "-b", b.Addr, "-t", topic, "-C", "-o", "beginning", "-e", "-q")
		out, err := cons.Output()
		if err != nil {
			t.Fatalf("kcat consume %s: %v", codec, err)
		}
		if !bytes.Equal(out, in.Bytes()) {
			t.Fatalf("kcat %s: consumed %d bytes, produced %d", codec, len(out), in.Len())
		}
	}
	meta, err := exec.CommandContext(ctx, kcat, "-b", b.Addr, "-L").CombinedOutput()
	if err != nil || !strings.Contains(string(meta), "kcat-zstd") {
		t.Fatalf("kcat -L: %v\n%s", err, meta)
	}
	t.Log("kcat: 5 codecs x 1000 lines produced and consumed byte for byte")
}

// needPython is python3 with the Debian client modules named importable.
// Under CI they must be (.ci/install-deps installs them); elsewhere their
// absence skips, saying so.
func needPython(t *testing.T, modules ...string) string {
	t.Helper()
	py := needTool(t, "/usr/bin/python3")
	if err := exec.Command(py, "-c", "import "+strings.Join(modules, ", ")).Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3 modules %v are not importable: %v", modules, err)
		}
		t.Skipf("python3 modules %v not installed: %v", modules, err)
	}
	return py
}

func TestPythonClientsRoundTrip(t *testing.T) {
	py := needPython(t, "confluent_kafka", "kafka")
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "python/roundtrip.py", b.Addr, "py")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python round trip: %v", err)
	}
}
