package txn_test

import (
	"github.com/regent-broker/regent/actors/group"
	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/actors/txn"
)

var (
	_ txn.OffsetsSink  = (*group.Manager)(nil)
	_ txn.TxnPartition = (*partition.Partition)(nil)
)
