package group

import "github.com/twmb/franz-go/pkg/kerr"

// The member-level checks that KIP-848 consumer groups and KIP-1071
// streams groups make of an offset commit and an offset fetch alike. A
// group hands in what it knows of the member: its epoch, and whether it
// exists.

// memberCommitCheck is the commit check up to the per-partition part: an
// admin commit (negative epoch) into an empty group, or a commit at the
// member's epoch, is taken whole (nil, true); an unknown member, an old
// OffsetCommit version or an epoch ahead of the member's is refused (err,
// true); a commit from an older epoch is for the caller to check per
// partition (nil, false).
func memberCommitCheck(empty bool, epoch, memberEpoch int32, known, versionOK bool, stale *kerr.Error) (*kerr.Error, bool) {
	switch {
	case epoch < 0 && empty:
		return nil, true
	case !known:
		return kerr.UnknownMemberID, true
	case !versionOK:
		// Members of these protocols commit with OffsetCommit v9+.
		return kerr.UnsupportedVersion, true
	case epoch == memberEpoch:
		return nil, true
	case epoch > memberEpoch || epoch < 0:
		return stale, true
	}
	return nil, false
}

// memberFetchCheck is the OffsetFetch check: a fetch without a member (an
// admin client's) is served; a member's must name it at its epoch.
func memberFetchCheck(q FetchQuery, epochOf func(id string) (int32, bool)) int16 {
	if q.MemberEpoch < 0 && q.MemberID == nil {
		return 0
	}
	id := ""
	if q.MemberID != nil {
		id = *q.MemberID
	}
	epoch, ok := epochOf(id)
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	if q.MemberEpoch != epoch {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}
