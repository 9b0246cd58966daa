package authztest

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// shareRows are the rows of the share group APIs (KIP-932).
func shareRows() []row {
	const (
		read     = kernel.OpRead
		del      = kernel.OpDelete
		describe = kernel.OpDescribe
		action   = kernel.OpClusterAction
	)
	d := func(cs ...check) []check { return cs }
	taf, gaf, caf := kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.ClusterAuthorizationFailed
	const shareG = "sg-authz"
	heartbeat := func(*fixture) kmsg.Request {
		r := kmsg.NewPtrShareGroupHeartbeatRequest()
		r.GroupID, r.MemberID, r.SubscribedTopicNames = shareG, "m-authz", []string{topicT}
		return r
	}
	fetch := func(f *fixture) kmsg.Request {
		r := kmsg.NewPtrShareFetchRequest()
		r.GroupID, r.MemberID = kmsg.StringPtr(shareG), kmsg.StringPtr("m-authz")
		t := kmsg.NewShareFetchRequestTopic()
		t.TopicID = f.topicID
		t.Partitions = append(t.Partitions, kmsg.NewShareFetchRequestTopicPartition())
		r.Topics = append(r.Topics, t)
		return r
	}
	fetchParts := func(resp kmsg.Response) []int16 {
		var out []int16
		for _, t := range resp.(*kmsg.ShareFetchResponse).Topics {
			for _, p := range t.Partitions {
				out = append(out, p.ErrorCode)
			}
		}
		return out
	}
	stateParts := func(resp kmsg.Response) []int16 {
		var out []int16
		switch r := resp.(type) {
		case *kmsg.ReadShareGroupStateResponse:
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					out = append(out, p.ErrorCode)
				}
			}
		case *kmsg.WriteShareGroupStateResponse:
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					out = append(out, p.ErrorCode)
				}
			}
		}
		return out
	}
	describeOffsets := func(*fixture) kmsg.Request {
		r := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		g.GroupID = shareG
		t := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		t.Topic, t.Partitions = topicT, []int32{0}
		g.Topics = append(g.Topics, t)
		r.Groups = append(r.Groups, g)
		return r
	}
	alterOffsets := func(*fixture) kmsg.Request {
		r := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		r.GroupID = shareG + "-alter"
		t := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		t.Topic = topicT
		p := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	}
	deleteOffsets := func(*fixture) kmsg.Request {
		r := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		r.GroupID = shareG + "-delete"
		t := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
		t.Topic = topicT
		r.Topics = append(r.Topics, t)
		return r
	}
	return []row{
		codeRow("ShareGroupHeartbeat: Read on the group", kmsg.ShareGroupHeartbeat, d(group(read, shareG)), -1,
			heartbeat, func(resp kmsg.Response) int16 { return resp.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode }, gaf, nil),
		codeRow("ShareGroupHeartbeat: Describe on each subscribed topic", kmsg.ShareGroupHeartbeat, d(topic(describe, topicT)), -1,
			heartbeat, func(resp kmsg.Response) int16 { return resp.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode }, taf, nil),
		codeRow("ShareGroupDescribe: Describe on the group", kmsg.ShareGroupDescribe, d(group(describe, shareG)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrShareGroupDescribeRequest()
				r.GroupIDs = []string{shareG}
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.ShareGroupDescribeResponse).Groups[0].ErrorCode }, gaf, nil),
		codeRow("ShareFetch: Read on the group", kmsg.ShareFetch, d(group(read, shareG)), -1,
			fetch, func(resp kmsg.Response) int16 { return resp.(*kmsg.ShareFetchResponse).ErrorCode }, gaf, nil),
		codesRow("ShareFetch: Read on each topic", kmsg.ShareFetch, d(topic(read, topicT)), -1,
			fetch, fetchParts, taf, nil),
		codeRow("ShareAcknowledge: Read on the group", kmsg.ShareAcknowledge, d(group(read, shareG)), -1,
			func(f *fixture) kmsg.Request {
				r := kmsg.NewPtrShareAcknowledgeRequest()
				r.GroupID, r.MemberID, r.ShareSessionEpoch = kmsg.StringPtr(shareG), kmsg.StringPtr("m-authz"), 1
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.ShareAcknowledgeResponse).ErrorCode }, gaf, nil),
		codesRow("ReadShareGroupState: ClusterAction on the cluster", kmsg.ReadShareGroupState, d(cluster(action)), -1,
			func(f *fixture) kmsg.Request {
				r := kmsg.NewPtrReadShareGroupStateRequest()
				r.GroupID = shareG
				t := kmsg.NewReadShareGroupStateRequestTopic()
				t.TopicID = f.topicID
				t.Partitions = append(t.Partitions, kmsg.NewReadShareGroupStateRequestTopicPartition())
				r.Topics = append(r.Topics, t)
				return r
			}, stateParts, caf, nil),
		codesRow("WriteShareGroupState: ClusterAction on the cluster", kmsg.WriteShareGroupState, d(cluster(action)), -1,
			func(f *fixture) kmsg.Request {
				r := kmsg.NewPtrWriteShareGroupStateRequest()
				r.GroupID = shareG + "-state"
				t := kmsg.NewWriteShareGroupStateRequestTopic()
				t.TopicID = f.topicID
				t.Partitions = append(t.Partitions, kmsg.NewWriteShareGroupStateRequestTopicPartition())
				r.Topics = append(r.Topics, t)
				return r
			}, stateParts, caf, nil),
		codeRow("DescribeShareGroupOffsets: Describe on the group", kmsg.DescribeShareGroupOffsets, d(group(describe, shareG)), -1,
			describeOffsets, func(resp kmsg.Response) int16 {
				return resp.(*kmsg.DescribeShareGroupOffsetsResponse).Groups[0].ErrorCode
			}, gaf, nil),
		codesRow("DescribeShareGroupOffsets: Describe on each topic", kmsg.DescribeShareGroupOffsets, d(topic(describe, topicT)), -1,
			describeOffsets, func(resp kmsg.Response) []int16 {
				var out []int16
				for _, t := range resp.(*kmsg.DescribeShareGroupOffsetsResponse).Groups[0].Topics {
					for _, p := range t.Partitions {
						out = append(out, p.ErrorCode)
					}
				}
				return out
			}, taf, nil),
		codeRow("AlterShareGroupOffsets: Read on the group", kmsg.AlterShareGroupOffsets, d(group(read, shareG+"-alter")), -1,
			alterOffsets, func(resp kmsg.Response) int16 { return resp.(*kmsg.AlterShareGroupOffsetsResponse).ErrorCode }, gaf, nil),
		codesRow("AlterShareGroupOffsets: Read on each topic", kmsg.AlterShareGroupOffsets, d(topic(read, topicT)), -1,
			alterOffsets, func(resp kmsg.Response) []int16 {
				var out []int16
				for _, t := range resp.(*kmsg.AlterShareGroupOffsetsResponse).Topics {
					for _, p := range t.Partitions {
						out = append(out, p.ErrorCode)
					}
				}
				return out
			}, taf, nil),
		codeRow("DeleteShareGroupOffsets: Delete on the group", kmsg.DeleteShareGroupOffsets, d(group(del, shareG+"-delete")), -1,
			deleteOffsets, func(resp kmsg.Response) int16 { return resp.(*kmsg.DeleteShareGroupOffsetsResponse).ErrorCode }, gaf, nil),
		codesRow("DeleteShareGroupOffsets: Read on each topic", kmsg.DeleteShareGroupOffsets, d(topic(read, topicT)), -1,
			deleteOffsets, func(resp kmsg.Response) []int16 {
				var out []int16
				for _, t := range resp.(*kmsg.DeleteShareGroupOffsetsResponse).Topics {
					out = append(out, t.ErrorCode)
				}
				return out
			}, taf, nil),
	}
}
