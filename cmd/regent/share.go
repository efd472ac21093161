package main

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/group"
	"github.com/regent-broker/regent/actors/groupconfig"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/actors/share"
	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/protocol"
)

// openShare opens the share-partition manager (KIP-932): it reads the
// partitions' logs through the registry and each group's share configs
// from the GROUP config store. standby: a cluster node, which serves once
// it leads (Activate).
func openShare(stateDir string, root *actor.RootContext, reg *topics.Registry, groupConfigs *groupconfig.Store, repl replication.Replicator, fsync, standby bool, logger *slog.Logger) (*share.Manager, error) {
	return share.NewManager(share.Options{
		DataDir: stateDir, Root: root, Logger: logger, Repl: repl, Fsync: fsync, Standby: standby,
		Logs: func(topic string, p int32) (share.Log, bool) {
			pp := reg.Partition(topic, p)
			if pp == nil {
				return nil, false
			}
			return share.FromPartition(pp), true
		},
		Config: shareConfigs(groupConfigs),
	})
}

// shareConfigs gives a group's share configs in force.
func shareConfigs(groupConfigs *groupconfig.Store) func(string) share.Config {
	return func(g string) share.Config { return share.ConfigFrom(groupConfigs.Values(g)) }
}

// wireShare connects the share groups' parts: the protocol serves the data
// path and admin APIs with the manager; the coordinator's share members
// leaving close their sessions and release their records; a deleted share
// group's share-partition state is dropped.
func wireShare(srv *protocol.Server, groups *group.Manager, mgr *share.Manager, core protocol.ShareCore, groupConfigs *groupconfig.Store, logger *slog.Logger) {
	srv.SetShare(core, shareConfigs(groupConfigs))
	wireShareGroups(srv, groups, mgr, logger)
}

// wireShareGroups connects one coordinator's share groups to its
// share-partition manager.
func wireShareGroups(srv *protocol.Server, groups *group.Manager, mgr *share.Manager, logger *slog.Logger) {
	groups.SetShareMemberListener(srv.ShareMemberLeft)
	groups.SetShareGroupDeletedListener(func(g string) {
		srv.ShareGroupDeleted(g)
		mgr.DeleteGroup(g, func(code int16) {
			if code != 0 {
				logger.Warn("share: dropping a deleted group's share-partitions failed", "group", g, "error", kerr.ErrorForCode(code))
			}
		})
	})
}
