package protocol

// Metadata: versions 0-13. Topics are looked up by name or (v10+) id; the
// internal topics __consumer_offsets and __transaction_state are listed
// with the others, is_internal set (internal_topics.go); a
// missing topic is created when the request allows it (always before v4)
// and the broker's auto.create.topics.enable is true. Every partition is led
// by the cluster's leader (this node when single); the voters are its
// replicas and the voters the leader hears from its ISR.
//
// ACLs: a listing of all topics leaves out those the principal may not
// DESCRIBE; a named one answers TOPIC_AUTHORIZATION_FAILED; auto-creation
// needs CREATE on the cluster or the topic (else TOPIC_AUTHORIZATION_FAILED).

import (
	"slices"

	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/topics"
)

func init() { register(3, 0, 13, (*Server).metadata) }

func (s *Server) metadata(r *Request) {
	req := r.Msg.(*kmsg.MetadataRequest)
	allowAuto := req.Version < 4 || req.AllowAutoTopicCreation
	if allowAuto && topics.AutoCreate(s.topics.Broker()) {
		for _, t := range req.Topics {
			if t.Topic != nil && s.topics.Get(*t.Topic) == nil && !isInternalTopic(*t.Topic) {
				s.async(r, func() kmsg.Response { return s.metadataCreating(r, req) })
				return
			}
		}
	}
	if s.mayCatchUp(r) {
		if missing := s.unknownNamedTopics(req); len(missing) > 0 {
			s.async(r, func() kmsg.Response { return s.metadataCatchingUp(r, req, missing) })
			return
		}
	}
	r.Respond(s.buildMetadata(r, req, false))
}

func (s *Server) buildMetadata(r *Request, req *kmsg.MetadataRequest, create bool) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	for _, b := range s.cluster.Brokers() {
		resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: b.ID, Host: b.Host, Port: b.Port, Rack: rackPtr(b.Rack)})
	}
	cid := s.cluster.ClusterID()
	resp.ClusterID = &cid
	resp.ControllerID = s.controllerID()
	if req.IncludeClusterAuthorizedOperations && s.authz != nil {
		resp.AuthorizedOperations = s.authorizedOps(r, acls.Cluster, acls.ClusterName, clusterOperations)
	}
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range s.topics.List() {
			if s.authorizedQuiet(r, acls.Describe, acls.Topic, t.Name) {
				resp.Topics = append(resp.Topics, s.topicMetadataFor(r, req, t))
			}
		}
		for _, it := range s.internalTopics() {
			if s.authorizedQuiet(r, acls.Describe, acls.Topic, it.Name) {
				resp.Topics = append(resp.Topics, s.internalTopicMetadata(r, req, it))
			}
		}
		return resp
	}
	for _, rt := range req.Topics {
		var t *topics.Topic
		switch {
		case rt.Topic != nil:
			if !s.authorized(r, acls.Describe, acls.Topic, *rt.Topic) {
				resp.Topics = append(resp.Topics, deniedTopicMetadata(rt.Topic, rt.TopicID))
				continue
			}
			if it, ok := s.internalTopic(*rt.Topic); ok {
				resp.Topics = append(resp.Topics, s.internalTopicMetadata(r, req, it))
				continue
			}
			t = s.topics.Get(*rt.Topic)
			if t == nil && create && s.authz != nil && !s.authorizedQuiet(r, acls.Create, acls.Cluster, acls.ClusterName) && !s.authorized(r, acls.Create, acls.Topic, *rt.Topic) {
				resp.Topics = append(resp.Topics, deniedTopicMetadata(rt.Topic, rt.TopicID))
				continue
			}
			if t == nil && create {
				var err error
				t, err = s.topics.Create(topics.CreateSpec{Name: *rt.Topic, Partitions: -1, ReplicationFactor: -1})
				var te *topics.Error
				if err != nil && errors.As(err, &te) && te.Code == kerr.TopicAlreadyExists {
					t, err = s.topics.Get(*rt.Topic), nil
				}
				if err != nil {
					mt := kmsg.NewMetadataResponseTopic()
					mt.Topic = rt.Topic
					mt.ErrorCode = errorCode(err)
					resp.Topics = append(resp.Topics, mt)
					continue
				}
			}
		default:
			if it, ok := s.internalTopicByID(rt.TopicID); ok {
				if !s.authorized(r, acls.Describe, acls.Topic, it.Name) {
					resp.Topics = append(resp.Topics, deniedTopicMetadata(nil, rt.TopicID))
				} else {
					resp.Topics = append(resp.Topics, s.internalTopicMetadata(r, req, it))
				}
				continue
			}
			t = s.topics.GetByID(rt.TopicID)
			if t != nil && !s.authorized(r, acls.Describe, acls.Topic, t.Name) {
				resp.Topics = append(resp.Topics, deniedTopicMetadata(nil, rt.TopicID))
				continue
			}
		}
		if t == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if rt.Topic == nil {
				mt.ErrorCode = kerr.UnknownTopicID.Code
			} else if topics.ValidateName(*rt.Topic) != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, s.topicMetadataFor(r, req, t))
	}
	return resp
}

// topicOperations are the operations on a topic (Kafka's AclOperation
// codes): READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
// DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11.
const topicOperations = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11

// topicMetadataFor is topicMetadata with the operations the principal may
// do on the topic, when the request asks (v8+) and an authorizer is on.
func (s *Server) topicMetadataFor(r *Request, req *kmsg.MetadataRequest, t *topics.Topic) kmsg.MetadataResponseTopic {
	mt := s.topicMetadata(t)
	if req.IncludeTopicAuthorizedOperations && s.authz != nil {
		mt.AuthorizedOperations = s.authorizedOps(r, acls.Topic, t.Name, topicOperations)
	}
	return mt
}

// deniedTopicMetadata is a topic the principal may not describe.
func deniedTopicMetadata(name *string, id [16]byte) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID = name, id
	mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
	return mt
}

func (s *Server) topicMetadata(t *topics.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.AuthorizedOperations = -2147483648
	// A partition is led by its raft group's leader, in the group's term;
	// its ISR is the group's in-sync voters. Every group has every voter.
	voters, groups := s.cluster.Voters(), s.newGroupStates()
	for i := range t.Partitions {
		g := groups.of(t, int32(i))
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader = g.leader
		if !g.known {
			mp.Leader, mp.ErrorCode = -1, kerr.LeaderNotAvailable.Code
		}
		mp.LeaderEpoch = g.epoch
		mp.Replicas, mp.ISR = replicaLists(t, int32(i), voters, g.isr)
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// replicaLists are partition p's replicas and in-sync replicas (isr: its
// group's) as reported: every voter holds every partition, listed in the
// order ReplicaOrder gives, that of the replica assignment the partition
// was created with, if any, after its partition group's preferred leader,
// if it has one (the first is the preferred leader a client expects); t
// nil: an internal topic.
func replicaLists(t *topics.Topic, p int32, voters, isr []int32) (replicas, inSync []int32) {
	if t == nil || (t.PartitionGroup(p) == 0 && (int(p) >= len(t.Assignments) || len(t.Assignments[p]) == 0)) {
		return voters, isr
	}
	replicas = t.ReplicaOrder(p, voters)
	inSync = make([]int32, 0, len(isr))
	for _, b := range replicas {
		if slices.Contains(isr, b) {
			inSync = append(inSync, b)
		}
	}
	return replicas, inSync
}
