package protocol

// UpdateFeatures: versions 0-2. Changes finalized feature levels as
// Kafka's controller does (actors/features holds the rules): the whole
// request is applied as one replicated command or refused with the first
// failure as the top-level error (INVALID_UPDATE_VERSION with Kafka's
// message); v0-1 then list every feature with NONE. v0's AllowDowngrade
// is a safe downgrade. ValidateOnly checks and changes nothing. Needs
// ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED).
// A cluster follower forwards the request to the leader (forward.go), as
// Kafka's brokers forward it to the controller.

import (
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/features"
)

func init() { register(57, 0, 2, (*Server).updateFeatures) }

// SetFeatures installs the finalized feature store (ApiVersions,
// UpdateFeatures); call it before serving.
func (s *Server) SetFeatures(f *features.Store) { s.features = f }

func (s *Server) updateFeatures(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	req := r.Msg.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	answer := func(err error) {
		resp.ErrorCode = errorCode(err)
		if err != nil {
			resp.ErrorMessage = kafkaMessage(err)
		} else if req.Version < 2 {
			for _, u := range req.FeatureUpdates {
				resp.Results = append(resp.Results, kmsg.UpdateFeaturesResponseResult{Feature: u.Feature})
			}
		}
		r.Respond(resp)
	}
	switch {
	case !s.authorized(r, acls.Alter, acls.Cluster, acls.ClusterName):
		answer(kerr.ClusterAuthorizationFailed)
		return
	case s.features == nil:
		answer(errors.New("this broker keeps no finalized features"))
		return
	}
	ups := make([]features.Update, len(req.FeatureUpdates))
	for i, u := range req.FeatureUpdates {
		typ := features.UpgradeType(u.UpgradeType)
		if req.Version == 0 {
			typ = features.Upgrade
			if u.AllowDowngrade {
				typ = features.SafeDowngrade
			}
		}
		// A level below 1 asks for the feature's deletion: level 0.
		ups[i] = features.Update{Feature: u.Feature, Level: max(u.MaxVersionLevel, 0), Type: typ}
		if u.MaxVersionLevel < 0 {
			ups[i].Level = u.MaxVersionLevel // refused as Kafka refuses it
		}
	}
	if req.ValidateOnly {
		answer(s.features.Validate(ups))
		return
	}
	if err := s.features.Validate(ups); err != nil {
		// Refused here without a proposal; Apply checks again on every
		// node against the levels in force when it commits.
		answer(err)
		return
	}
	s.features.Update(ups, answer)
}

// kafkaMessage is err's message without the "CODE: description: " prefix
// of a wrapped *kerr.Error, as Kafka sends its messages.
func kafkaMessage(err error) *string {
	msg := err.Error()
	var ke *kerr.Error
	if errors.As(err, &ke) {
		msg = strings.TrimPrefix(msg, ke.Error()+": ")
	}
	return &msg
}
