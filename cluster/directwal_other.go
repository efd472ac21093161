//go:build !linux

package cluster

import (
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// directVFS is raft-wal's own buffered file system where O_DIRECT and
// fallocate are not to be had (directwal_linux.go says why Linux writes
// the raft log around the page cache): the same bytes, one more copy.
type directVFS struct {
	types.VFS
}

func newDirectVFS() directVFS { return directVFS{VFS: walfs.New()} }
