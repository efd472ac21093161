package protocol

// DescribeLogDirs: versions 0-5. One log dir: the data directory, with
// its volume's total and usable bytes (v4+). v5 (KIP-1066) reports whether
// the dir is cordoned against new partitions; Regent has one dir and no
// cordoning, so it never is.

import (
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/topics"
)

func init() { register(35, 0, 5, (*Server).describeLogDirs) }

func (s *Server) describeLogDirs(r *Request) {
	req := r.Msg.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !s.authorizedCluster(r, acls.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = s.logDirPath()
	var fs syscall.Statfs_t
	if err := syscall.Statfs(s.cfg.DataDir, &fs); err == nil {
		dir.TotalBytes = int64(fs.Blocks) * int64(fs.Bsize)
		dir.UsableBytes = int64(fs.Bavail) * int64(fs.Bsize)
	} else {
		dir.TotalBytes, dir.UsableBytes = -1, -1
	}
	add := func(t *topics.Topic, parts []int32) {
		ot := kmsg.NewDescribeLogDirsResponseDirTopic()
		ot.Topic = t.Name
		for _, i := range parts {
			if i < 0 || int(i) >= len(t.Partitions) {
				continue
			}
			op := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			op.Partition = i
			op.Size = t.Partitions[i].Log().Size()
			ot.Partitions = append(ot.Partitions, op)
		}
		dir.Topics = append(dir.Topics, ot)
	}
	if req.Topics == nil {
		for _, t := range s.topics.List() {
			all := make([]int32, len(t.Partitions))
			for i := range all {
				all[i] = int32(i)
			}
			add(t, all)
		}
	} else {
		for _, rt := range req.Topics {
			if t := s.topics.Get(rt.Topic); t != nil {
				add(t, rt.Partitions)
			}
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	r.Respond(resp)
}
