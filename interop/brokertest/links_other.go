//go:build !linux

package brokertest

import "testing"

// Links cuts the network between a separated cluster's nodes: Linux only
// (links_linux.go).
type Links struct{}

// StartSeparatedCluster skips the test: it needs Linux's nftables.
func StartSeparatedCluster(t testing.TB, n int, extra ...string) (*Cluster, *Links) {
	t.Skip("cutting links between nodes needs Linux (nftables)")
	return nil, nil
}

func (*Links) Cut(a, b int32)   {}
func (*Links) Isolate(id int32) {}
func (*Links) Heal()            {}
func (*Links) Cuts() string     { return "" }
