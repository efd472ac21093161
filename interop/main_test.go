package interop

import (
	"os"
	"testing"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestMain removes the regent binary the tests built once they are done.
func TestMain(m *testing.M) {
	code := m.Run()
	brokertest.RemoveBinary()
	os.Exit(code)
}
