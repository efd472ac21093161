// Package features holds the cluster's finalized feature levels (KIP-584):
// metadata.version, kraft.version, transaction.version, group.version,
// share.version and streams.version, as Kafka 4.3 names them. ApiVersions (v3+) advertises what this broker
// supports and what is finalized; UpdateFeatures changes a level through
// one replicated command, so every node holds the same levels and epoch,
// and they survive restarts (the state directory's meta/features.json).
//
// The rules of a change are Kafka's (FeatureControlManager.updateFeature):
// a level outside the supported range, an unknown feature, a downgrade
// without a downgrade type or an "upgrade" to a lower level are refused
// with INVALID_UPDATE_VERSION, and a request is applied whole or not at
// all.
package features

import (
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The feature names.
const (
	MetadataVersion    = "metadata.version"
	KRaftVersion       = "kraft.version"
	TransactionVersion = "transaction.version"
	GroupVersion       = "group.version"
	ShareVersion       = "share.version"
	StreamsVersion     = "streams.version"
	// RegentRaftVersion is Regent's own: the raft command formats a
	// cluster's leader may write (see Supported).
	RegentRaftVersion = "regent.raft.version"
)

// Feature is one feature this broker supports: the levels it can be
// finalized at, and the level a new cluster starts with.
type Feature struct {
	Name     string
	Min, Max int16
	Default  int16
	// Legacy is the level of a data directory that ran before Regent
	// finalized features (see Legacy).
	Legacy int16
}

// Supported is the table, sorted by name. Kafka 4.3's defaults for a new
// cluster are its latest production levels: metadata.version 30
// (4.3-IV0), kraft.version 1, transaction.version 2, group.version 1,
// share.version 1, streams.version 1.
// Regent's ranges are the levels it can honestly run at:
//   - metadata.version: only 4.3-IV0; Regent keeps no KRaft metadata log,
//     the level tells clients which Kafka release it answers as.
//   - kraft.version: only 1 (a quorum whose voters change at run time,
//     KIP-853), which is what hashicorp/raft's membership does.
//   - transaction.version 0-2: below 2 clients run transactions as before
//     KIP-890 part 2 (AddPartitionsToTxn, no epoch bump per transaction);
//     2 lets them send Produce v12+, TxnOffsetCommit v5 and EndTxn v5.
//   - group.version: only 1; the consumer group protocol (KIP-848) is
//     always served.
//   - share.version 0-1: at 1 share groups (KIP-932) are served, at 0
//     their APIs are neither advertised nor served, as Kafka's brokers do.
//     A directory from before features were finalized starts at 0 (it
//     served no share groups), like a Kafka cluster upgraded from a
//     release without them, until kafka-features.sh upgrade raises it.
//   - streams.version 0-1: at 1 streams groups (KIP-1071) are served, at 0
//     their APIs are neither advertised nor served; a directory from
//     before features were finalized starts at 0, as with share.version.
//   - regent.raft.version 0-1 (Regent's, not Kafka's): at 1 the leader
//     replicates a produce marked as checked, so the other nodes skip the
//     CRC and per-record checks, and a node of an earlier version cannot
//     read it. A new cluster starts at 1; one whose finalized levels are
//     from before this feature, or from before features, at 0, until
//     kafka-features.sh upgrade raises it once every node runs a version
//     that knows it (as Kafka gates a new record format on
//     metadata.version).
var Supported = []Feature{
	{Name: GroupVersion, Min: 1, Max: 1, Default: 1, Legacy: 1},
	{Name: KRaftVersion, Min: 1, Max: 1, Default: 1, Legacy: 1},
	{Name: MetadataVersion, Min: 30, Max: 30, Default: 30, Legacy: 30},
	{Name: RegentRaftVersion, Min: 0, Max: 1, Default: 1, Legacy: 0},
	{Name: ShareVersion, Min: 0, Max: 1, Default: 1, Legacy: 0},
	{Name: StreamsVersion, Min: 0, Max: 1, Default: 1, Legacy: 0},
	{Name: TransactionVersion, Min: 0, Max: 2, Default: 2, Legacy: 0},
}

// Lookup finds a supported feature by name.
func Lookup(name string) (Feature, bool) {
	i := slices.IndexFunc(Supported, func(f Feature) bool { return f.Name == name })
	if i < 0 {
		return Feature{}, false
	}
	return Supported[i], true
}

// Finalized is the cluster's finalized levels and their epoch. A level of
// 0 means the feature is off: it is not listed (as Kafka omits it).
// Published values are never mutated.
type Finalized struct {
	// Epoch grows by one with every applied change; clients keep the
	// levels of the highest epoch they have seen (FinalizedFeaturesEpoch).
	Epoch  int64            `json:"epoch"`
	Levels map[string]int16 `json:"levels"`
}

// Defaults is what a new cluster starts with (epoch 0).
func Defaults() Finalized {
	f := Finalized{Levels: map[string]int16{}}
	for _, s := range Supported {
		if s.Default > 0 {
			f.Levels[s.Name] = s.Default
		}
	}
	return f
}

// Legacy is what a data directory that ran before meta/features.json
// existed starts with (epoch 0): the levels that match what it served.
// It advertised no finalized features, so clients saw transaction.version
// 0 and ran transactions as before KIP-890 part 2; Kafka keeps an upgraded
// cluster's finalized levels until an operator raises them
// (kafka-features.sh upgrade), and so does Regent: transaction.version
// stays 0 until then. The other features have one supported level, the
// one that directory already ran at (what they gate was served).
func Legacy() Finalized {
	f := Finalized{Levels: map[string]int16{}}
	for _, s := range Supported {
		if s.Legacy > 0 {
			f.Levels[s.Name] = s.Legacy
		}
	}
	return f
}

// Level is a feature's finalized level (0: off or unknown).
func (f Finalized) Level(name string) int16 { return f.Levels[name] }

// UpgradeType is UpdateFeatures' UpgradeType (v1+; v0's AllowDowngrade
// maps to SafeDowngrade).
type UpgradeType int8

// Kafka's upgrade types.
const (
	Upgrade         UpgradeType = 1
	SafeDowngrade   UpgradeType = 2
	UnsafeDowngrade UpgradeType = 3
)

// Update asks for one feature's level.
type Update struct {
	Feature string      `json:"feature"`
	Level   int16       `json:"level"`
	Type    UpgradeType `json:"type"`
}

// Apply checks updates against cur and returns the levels they make, with
// the epoch bumped. err is a *kerr.Error wrapped with Kafka's message (the
// first update refused); nothing is applied then. nodeID names this broker
// in the messages as Kafka names its controller.
func Apply(cur Finalized, ups []Update, nodeID int32) (Finalized, error) {
	next := Finalized{Epoch: cur.Epoch + 1, Levels: maps.Clone(cur.Levels)}
	if next.Levels == nil {
		next.Levels = map[string]int16{}
	}
	seen := map[string]bool{}
	for _, u := range ups {
		if seen[u.Feature] {
			return cur, fmt.Errorf("%w: feature %s appears more than once", kerr.InvalidRequest, u.Feature)
		}
		seen[u.Feature] = true
		if err := check(cur, u, nodeID); err != nil {
			return cur, err
		}
		if u.Level == 0 {
			delete(next.Levels, u.Feature)
		} else {
			next.Levels[u.Feature] = u.Level
		}
	}
	return next, nil
}

func check(cur Finalized, u Update, nodeID int32) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: Invalid update version %d for feature %s. %s", kerr.InvalidUpdateVersion, u.Level, u.Feature, fmt.Sprintf(format, args...))
	}
	if u.Type < Upgrade || u.Type > UnsafeDowngrade {
		return bad("The controller does not support the given upgrade type.")
	}
	if u.Level < 0 {
		return bad("A feature version cannot be less than 0.")
	}
	f, ok := Lookup(u.Feature)
	if !ok {
		return bad("Local controller %d does not support this feature.", nodeID)
	}
	if u.Level < f.Min || u.Level > f.Max {
		return bad("Local controller %d only supports versions %d-%d", nodeID, f.Min, f.Max)
	}
	have := cur.Level(u.Feature)
	switch {
	case u.Level < have && u.Type == Upgrade:
		return bad("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")
	case u.Level > have && u.Type != Upgrade:
		return bad("Can't downgrade to a newer version.")
	}
	// Kafka's dependencies (transaction.version and group.version on
	// metadata.version 4.0+) always hold: metadata.version is fixed at
	// 4.3-IV0.
	return nil
}
