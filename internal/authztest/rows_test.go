package authztest

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// rows is the table of docs/security.md ("What each API checks"), one or more rows
// per API key.
func rows() []row {
	const (
		read     = kernel.OpRead
		write    = kernel.OpWrite
		create   = kernel.OpCreate
		del      = kernel.OpDelete
		alter    = kernel.OpAlter
		describe = kernel.OpDescribe
		action   = kernel.OpClusterAction
		descCfg  = kernel.OpDescribeConfigs
		alterCfg = kernel.OpAlterConfigs
		idem     = kernel.OpIdempotentWrite
	)
	d := func(cs ...check) []check { return cs }
	taf, gaf, caf, tiaf := kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed
	return append([]row{
		// Produce
		codesRow("Produce: Write on the topic", kmsg.Produce, d(topic(write, topicT)), -1,
			func(f *fixture) kmsg.Request { return produceReq(f, nil, plainBatch()) }, produceCodes, taf, endOfT),
		codesRow("Produce: transactional needs Write on the transactional id", kmsg.Produce, d(txnID(write, txnTX)), -1,
			func(f *fixture) kmsg.Request { return produceReq(f, strp(txnTX), f.txnBatch()) }, produceCodes, tiaf, endOfT),
		codesRow("Produce: a transactional batch without a transactional id", kmsg.Produce, nil, -1,
			func(f *fixture) kmsg.Request { return produceReq(f, nil, f.txnBatch()) }, produceCodes, tiaf, endOfT),
		// Fetch
		codesRow("Fetch: Read on the topic", kmsg.Fetch, d(topic(read, topicT)), -1,
			func(f *fixture) kmsg.Request { return fetchReq(f, -1) }, fetchCodes, taf, nil),
		codesRow("Fetch: a follower needs ClusterAction", kmsg.Fetch, d(cluster(action)), -1,
			func(f *fixture) kmsg.Request { return fetchReq(f, 7) }, fetchCodes, taf, nil),
		// ListOffsets
		codesRow("ListOffsets: Describe on the topic", kmsg.ListOffsets, d(topic(describe, topicT)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrListOffsetsRequest()
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = topicT
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Timestamp = -1
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				return r
			}, func(resp kmsg.Response) []int16 {
				var out []int16
				for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
					for _, p := range t.Partitions {
						out = append(out, p.ErrorCode)
					}
				}
				return out
			}, taf, nil),
		// OffsetForLeaderEpoch
		codesRow("OffsetForLeaderEpoch: Describe on the topic or ClusterAction", kmsg.OffsetForLeaderEpoch,
			d(topic(describe, topicT), cluster(action)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrOffsetForLeaderEpochRequest()
				rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
				rt.Topic = topicT
				rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				return r
			}, func(resp kmsg.Response) []int16 {
				var out []int16
				for _, t := range resp.(*kmsg.OffsetForLeaderEpochResponse).Topics {
					for _, p := range t.Partitions {
						out = append(out, p.ErrorCode)
					}
				}
				return out
			}, taf, nil),
		// Metadata
		codeRow("Metadata: Describe on a named topic", kmsg.Metadata, d(topic(describe, topicT)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = strp(topicT)
				r.Topics = append(r.Topics, rt)
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode }, taf, nil),
		codeRow("DescribeTopicPartitions: Describe on a named topic", kmsg.DescribeTopicPartitions, d(topic(describe, topicT)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrDescribeTopicPartitionsRequest()
				rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
				rt.Topic = topicT
				r.Topics = append(r.Topics, rt)
				return r
			}, func(resp kmsg.Response) int16 {
				return resp.(*kmsg.DescribeTopicPartitionsResponse).Topics[0].ErrorCode
			}, taf, nil),
		{name: "DescribeTopicPartitions: all topics leaves out what may not be described", key: kmsg.DescribeTopicPartitions, deny: d(topic(describe, topicT)), maxV: -1,
			req: func(*fixture) kmsg.Request { return kmsg.NewPtrDescribeTopicPartitionsRequest() },
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				var names []string
				for _, rt := range resp.(*kmsg.DescribeTopicPartitionsResponse).Topics {
					names = append(names, *rt.Topic)
				}
				if contains(names, topicT) || !contains(names, topicT2) {
					t.Errorf("all-topics DescribeTopicPartitions lists %v: want %s left out and %s in", names, topicT, topicT2)
				}
			}},
		{name: "Metadata: all topics leaves out what may not be described", key: kmsg.Metadata, deny: d(topic(describe, topicT)), maxV: -1,
			req: func(*fixture) kmsg.Request { return kmsg.NewPtrMetadataRequest() },
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				var names []string
				for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
					names = append(names, *mt.Topic)
				}
				if contains(names, topicT) || !contains(names, topicT2) {
					t.Errorf("all-topics Metadata lists %v: want %s left out and %s in", names, topicT, topicT2)
				}
			}},
		{name: "Metadata: a topic id that may not be described", key: kmsg.Metadata, deny: d(topic(describe, topicT)), maxV: -1,
			req: func(f *fixture) kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				rt := kmsg.NewMetadataRequestTopic()
				rt.TopicID = f.topicID
				r.Topics = append(r.Topics, rt)
				return r
			},
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				mt := resp.(*kmsg.MetadataResponse).Topics[0]
				wantCode(t, "Metadata by id", mt.ErrorCode, taf)
				if mt.Topic != nil && *mt.Topic != "" {
					t.Errorf("Metadata by id names the denied topic %q", *mt.Topic)
				}
			}},
		codeRow("Metadata: auto-creation needs Create on the cluster or the topic", kmsg.Metadata,
			d(cluster(create), topic(create, newT)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				r.AllowAutoTopicCreation = true
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = strp(newT)
				r.Topics = append(r.Topics, rt)
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode }, taf, noNewTopic),
		// CreateTopics
		codeRow("CreateTopics: Create on the cluster or the topic", kmsg.CreateTopics,
			d(cluster(create), topic(create, newT)), -1,
			func(*fixture) kmsg.Request { return createTopicReq(newT, false) },
			func(resp kmsg.Response) int16 { return resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode }, taf, noNewTopic),
		{name: "CreateTopics: configs in the answer need DescribeConfigs", key: kmsg.CreateTopics,
			deny: d(topic(descCfg, newT)), maxV: -1,
			req: func(*fixture) kmsg.Request { return createTopicReq(newT, true) },
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				rt := resp.(*kmsg.CreateTopicsResponse).Topics[0]
				wantCode(t, "CreateTopics error", rt.ErrorCode, noErrE)
				wantCode(t, "CreateTopics config error", rt.ConfigErrorCode, taf)
				if len(rt.Configs) != 0 || rt.NumPartitions != -1 {
					t.Errorf("CreateTopics shows %d configs and %d partitions to who may not describe them", len(rt.Configs), rt.NumPartitions)
				}
			}, state: noNewTopic},
		// DeleteTopics
		codeRow("DeleteTopics: Delete on the cluster or the topic", kmsg.DeleteTopics,
			d(cluster(del), topic(del, topicT2)), -1,
			func(*fixture) kmsg.Request { return deleteTopicReq(strp(topicT2), [16]byte{}) },
			func(resp kmsg.Response) int16 { return resp.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode }, taf, topicsNow),
		codeRow("DeleteTopics: a name needs Describe on the topic (or Delete on the cluster)", kmsg.DeleteTopics,
			d(cluster(del), topic(describe, topicT2)), -1,
			func(*fixture) kmsg.Request { return deleteTopicReq(strp(topicT2), [16]byte{}) },
			func(resp kmsg.Response) int16 { return resp.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode }, taf, topicsNow),
		{name: "DeleteTopics: by id, the name is hidden without Describe", key: kmsg.DeleteTopics,
			deny: d(cluster(del), topic(del, topicT2), topic(describe, topicT2)), maxV: -1,
			req: func(f *fixture) kmsg.Request { return deleteTopicReq(nil, f.t2ID) },
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				rt := resp.(*kmsg.DeleteTopicsResponse).Topics[0]
				wantCode(t, "DeleteTopics by id", rt.ErrorCode, taf)
				if rt.Topic != nil {
					t.Errorf("DeleteTopics by id names the denied topic %q", *rt.Topic)
				}
			}, state: topicsNow},
		// CreatePartitions
		codeRow("CreatePartitions: Alter on the topic", kmsg.CreatePartitions, d(topic(alter, topicT2)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrCreatePartitionsRequest()
				rt := kmsg.NewCreatePartitionsRequestTopic()
				rt.Topic, rt.Count = topicT2, 3
				r.Topics = append(r.Topics, rt)
				r.TimeoutMillis = 5000
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode }, taf,
			func(t *testing.T, f *fixture) any { return f.partitions(t, topicT2) }),
		// DescribeConfigs
		codeRow("DescribeConfigs: DescribeConfigs on the topic", kmsg.DescribeConfigs, d(topic(descCfg, topicT)), -1,
			func(*fixture) kmsg.Request {
				return configReq[kmsg.DescribeConfigsRequest](kmsg.ConfigResourceTypeTopic, topicT, "", "")
			}, configCode, taf, nil),
		codeRow("DescribeConfigs: a broker needs DescribeConfigs on the cluster", kmsg.DescribeConfigs, d(cluster(descCfg)), -1,
			func(f *fixture) kmsg.Request {
				return configReq[kmsg.DescribeConfigsRequest](kmsg.ConfigResourceTypeBroker, itoa(f.node), "", "")
			}, configCode, caf, nil),
		codeRow("DescribeConfigs: DescribeConfigs on the group", kmsg.DescribeConfigs, d(group(descCfg, groupG)), -1,
			func(*fixture) kmsg.Request {
				return configReq[kmsg.DescribeConfigsRequest](kmsg.ConfigResourceTypeGroupConfig, groupG, "", "")
			}, configCode, gaf, nil),
		// AlterConfigs
		codeRow("AlterConfigs: AlterConfigs on the topic", kmsg.AlterConfigs, d(topic(alterCfg, topicT)), -1,
			func(*fixture) kmsg.Request {
				return configReq[kmsg.AlterConfigsRequest](kmsg.ConfigResourceTypeTopic, topicT, "retention.ms", "12345")
			}, configCode, taf, retentionOfT),
		codeRow("AlterConfigs: a broker needs AlterConfigs on the cluster", kmsg.AlterConfigs, d(cluster(alterCfg)), -1,
			func(f *fixture) kmsg.Request {
				return configReq[kmsg.AlterConfigsRequest](kmsg.ConfigResourceTypeBroker, itoa(f.node), "log.retention.ms", "12345")
			}, configCode, caf, brokerRetention),
		// IncrementalAlterConfigs
		codeRow("IncrementalAlterConfigs: AlterConfigs on the topic", kmsg.IncrementalAlterConfigs, d(topic(alterCfg, topicT)), -1,
			func(*fixture) kmsg.Request {
				return configReq[kmsg.IncrementalAlterConfigsRequest](kmsg.ConfigResourceTypeTopic, topicT, "retention.ms", "12345")
			}, configCode, taf, retentionOfT),
		codeRow("IncrementalAlterConfigs: a broker needs AlterConfigs on the cluster", kmsg.IncrementalAlterConfigs, d(cluster(alterCfg)), -1,
			func(f *fixture) kmsg.Request {
				return configReq[kmsg.IncrementalAlterConfigsRequest](kmsg.ConfigResourceTypeBroker, itoa(f.node), "log.retention.ms", "12345")
			}, configCode, caf, brokerRetention),
		codeRow("IncrementalAlterConfigs: a broker logger needs AlterConfigs on the cluster", kmsg.IncrementalAlterConfigs, d(cluster(alterCfg)), -1,
			func(f *fixture) kmsg.Request {
				return configReq[kmsg.IncrementalAlterConfigsRequest](kmsg.ConfigResourceTypeBrokerLogger, itoa(f.node), "kafka.server", "DEBUG")
			}, configCode, caf, nil),
		codeRow("DescribeConfigs: a broker logger needs DescribeConfigs on the cluster", kmsg.DescribeConfigs, d(cluster(descCfg)), -1,
			func(f *fixture) kmsg.Request {
				return configReq[kmsg.DescribeConfigsRequest](kmsg.ConfigResourceTypeBrokerLogger, itoa(f.node), "", "")
			}, configCode, caf, nil),
		codeRow("IncrementalAlterConfigs: AlterConfigs on the group", kmsg.IncrementalAlterConfigs, d(group(alterCfg, groupG)), -1,
			func(*fixture) kmsg.Request {
				return configReq[kmsg.IncrementalAlterConfigsRequest](kmsg.ConfigResourceTypeGroupConfig, groupG, "consumer.session.timeout.ms", "46000")
			}, configCode, gaf, func(t *testing.T, f *fixture) any {
				return f.describeCfg(t, kmsg.ConfigResourceTypeGroupConfig, groupG, "consumer.session.timeout.ms")
			}),
		// DeleteRecords
		codesRow("DeleteRecords: Delete on the topic", kmsg.DeleteRecords, d(topic(del, topicT)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrDeleteRecordsRequest()
				rt := kmsg.NewDeleteRecordsRequestTopic()
				rt.Topic = topicT
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Offset = 2
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics, r.TimeoutMillis = append(r.Topics, rt), 5000
				return r
			}, func(resp kmsg.Response) []int16 {
				var out []int16
				for _, t := range resp.(*kmsg.DeleteRecordsResponse).Topics {
					for _, p := range t.Partitions {
						out = append(out, p.ErrorCode)
					}
				}
				return out
			}, taf, startOfT),
		// InitProducerID
		codeRow("InitProducerId: transactional needs Write on the transactional id", kmsg.InitProducerID,
			d(txnID(write, "tx-new")), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrInitProducerIDRequest()
				r.TransactionalID, r.TransactionTimeoutMillis = strp("tx-new"), 60000
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.InitProducerIDResponse).ErrorCode }, tiaf,
			func(t *testing.T, f *fixture) any { return listTxnIDs(t, f) }),
		codeRow("InitProducerId: idempotent needs IdempotentWrite on the cluster or Write on some topic", kmsg.InitProducerID,
			d(cluster(idem), check{write, kernel.ResTopic, "*"}), -1,
			func(*fixture) kmsg.Request { return kmsg.NewPtrInitProducerIDRequest() },
			func(resp kmsg.Response) int16 { return resp.(*kmsg.InitProducerIDResponse).ErrorCode }, caf, nil),
		codeRow("InitProducerId: idempotent with Write on some topic but no IdempotentWrite", kmsg.InitProducerID,
			d(cluster(idem)), -1,
			func(*fixture) kmsg.Request { return kmsg.NewPtrInitProducerIDRequest() },
			func(resp kmsg.Response) int16 { return resp.(*kmsg.InitProducerIDResponse).ErrorCode }, noErrE, nil),
		// AddPartitionsToTxn
		codesRow("AddPartitionsToTxn: Write on the transactional id", kmsg.AddPartitionsToTxn, d(txnID(write, txnTX)), 3,
			addPartitionsV3, addPartitionsV3Codes, tiaf, txnOf),
		{name: "AddPartitionsToTxn: Write on each topic", key: kmsg.AddPartitionsToTxn, deny: d(topic(write, topicT2)), maxV: 3,
			req: addPartitionsV3,
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				allCodes(t, "AddPartitionsToTxn", addPartitionsV3Codes(resp), taf)
			}, state: txnOf},
		codeRow("AddPartitionsToTxn: the broker form (v4+) needs ClusterAction", kmsg.AddPartitionsToTxn, d(cluster(action)), -1,
			func(f *fixture) kmsg.Request { return addPartitionsV4(f, false) }, func(resp kmsg.Response) int16 { return resp.(*kmsg.AddPartitionsToTxnResponse).ErrorCode }, caf, txnOf),
		{name: "AddPartitionsToTxn: the broker form (v4+) asks no Write", key: kmsg.AddPartitionsToTxn,
			deny: d(txnID(write, txnTX), topic(write, topicT2)), maxV: -1, mayNotAsk: true,
			req: func(f *fixture) kmsg.Request { return addPartitionsV4(f, true) },
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				r := resp.(*kmsg.AddPartitionsToTxnResponse)
				wantCode(t, "AddPartitionsToTxn v4", r.ErrorCode, noErrE)
				for _, tx := range r.Transactions {
					for _, tt := range tx.Topics {
						for _, p := range tt.Partitions {
							if p.ErrorCode == tiaf.Code || p.ErrorCode == taf.Code {
								t.Errorf("the broker form of AddPartitionsToTxn got %v", kerr.ErrorForCode(p.ErrorCode))
							}
						}
					}
				}
			}, state: txnOf},
		// AddOffsetsToTxn
		codeRow("AddOffsetsToTxn: Write on the transactional id", kmsg.AddOffsetsToTxn, d(txnID(write, txnTX)), -1,
			addOffsetsReq, func(resp kmsg.Response) int16 { return resp.(*kmsg.AddOffsetsToTxnResponse).ErrorCode }, tiaf, txnOf),
		codeRow("AddOffsetsToTxn: Read on the group", kmsg.AddOffsetsToTxn, d(group(read, groupG)), -1,
			addOffsetsReq, func(resp kmsg.Response) int16 { return resp.(*kmsg.AddOffsetsToTxnResponse).ErrorCode }, gaf, txnOf),
		// EndTxn
		codeRow("EndTxn: Write on the transactional id", kmsg.EndTxn, d(txnID(write, txnTX)), -1,
			func(f *fixture) kmsg.Request {
				r := kmsg.NewPtrEndTxnRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit = txnTX, f.pid, f.epoch, true
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.EndTxnResponse).ErrorCode }, tiaf, txnOf),
		// TxnOffsetCommit
		codesRow("TxnOffsetCommit: Write on the transactional id", kmsg.TxnOffsetCommit, d(txnID(write, txnTX)), -1,
			txnOffsetCommitReq, txnOffsetCommitCodes, tiaf, committedG),
		codesRow("TxnOffsetCommit: Read on the group", kmsg.TxnOffsetCommit, d(group(read, groupG)), -1,
			txnOffsetCommitReq, txnOffsetCommitCodes, gaf, committedG),
		codesRow("TxnOffsetCommit: Read on each topic", kmsg.TxnOffsetCommit, d(topic(read, topicT)), -1,
			txnOffsetCommitReq, txnOffsetCommitCodes, taf, committedG),
		// WriteTxnMarkers
		codesRow("WriteTxnMarkers: ClusterAction or Alter on the cluster", kmsg.WriteTxnMarkers,
			d(cluster(action), cluster(alter)), -1,
			func(f *fixture) kmsg.Request {
				r := kmsg.NewPtrWriteTxnMarkersRequest()
				m := kmsg.NewWriteTxnMarkersRequestMarker()
				m.ProducerID, m.ProducerEpoch, m.Committed = f.pid, f.epoch, false
				mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				mt.Topic, mt.Partitions = topicT, []int32{0}
				m.Topics = append(m.Topics, mt)
				r.Markers = append(r.Markers, m)
				return r
			}, func(resp kmsg.Response) []int16 {
				var out []int16
				for _, m := range resp.(*kmsg.WriteTxnMarkersResponse).Markers {
					for _, t := range m.Topics {
						for _, p := range t.Partitions {
							out = append(out, p.ErrorCode)
						}
					}
				}
				return out
			}, caf, func(t *testing.T, f *fixture) any { return [2]any{endOfT(t, f), txnOf(t, f)} }),
		// FindCoordinator
		codeRow("FindCoordinator: a group needs Describe on the group", kmsg.FindCoordinator, d(group(describe, groupG)), -1,
			func(*fixture) kmsg.Request { return findCoordinatorReq(groupG, 0) }, findCoordinatorCode, gaf, nil),
		codeRow("FindCoordinator: a transaction needs Describe on the transactional id", kmsg.FindCoordinator,
			d(txnID(describe, txnTX)), -1,
			func(*fixture) kmsg.Request { return findCoordinatorReq(txnTX, 1) }, findCoordinatorCode, tiaf, nil),
		// Classic group membership
		codeRow("JoinGroup: Read on the group", kmsg.JoinGroup, d(group(read, "jg")), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrJoinGroupRequest()
				r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = "jg", 30000, 30000, "consumer"
				p := kmsg.NewJoinGroupRequestProtocol()
				p.Name = "range"
				r.Protocols = append(r.Protocols, p)
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.JoinGroupResponse).ErrorCode }, gaf, groupList),
		codeRow("SyncGroup: Read on the group", kmsg.SyncGroup, d(group(read, "jg")), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrSyncGroupRequest()
				r.Group, r.MemberID, r.Generation = "jg", "m", 1
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.SyncGroupResponse).ErrorCode }, gaf, groupList),
		codeRow("Heartbeat: Read on the group", kmsg.Heartbeat, d(group(read, "jg")), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrHeartbeatRequest()
				r.Group, r.MemberID, r.Generation = "jg", "m", 1
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.HeartbeatResponse).ErrorCode }, gaf, groupList),
		codeRow("LeaveGroup: Read on the group", kmsg.LeaveGroup, d(group(read, "jg")), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrLeaveGroupRequest()
				r.Group, r.MemberID = "jg", "m"
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = "m"
				r.Members = append(r.Members, m)
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.LeaveGroupResponse).ErrorCode }, gaf, groupList),
		// OffsetCommit
		codesRow("OffsetCommit: Read on the group", kmsg.OffsetCommit, d(group(read, groupG)), -1,
			func(f *fixture) kmsg.Request { return offsetCommitReq(f, groupG, 2) }, offsetCommitCodes, gaf, committedG),
		codesRow("OffsetCommit: Read on each topic", kmsg.OffsetCommit, d(topic(read, topicT)), -1,
			func(f *fixture) kmsg.Request { return offsetCommitReq(f, groupG, 2) }, offsetCommitCodes, taf, committedG),
		// OffsetFetch
		codeRow("OffsetFetch: Describe on the group", kmsg.OffsetFetch, d(group(describe, groupG)), -1,
			func(f *fixture) kmsg.Request { return offsetFetchReq(f, groupG) },
			func(resp kmsg.Response) int16 { c, _ := offsetFetchCodes(resp); return c }, gaf, nil),
		codesRow("OffsetFetch: Describe on each topic", kmsg.OffsetFetch, d(topic(describe, topicT)), -1,
			func(f *fixture) kmsg.Request { return offsetFetchReq(f, groupG) },
			func(resp kmsg.Response) []int16 { _, p := offsetFetchCodes(resp); return p }, taf, nil),
		{name: "OffsetFetch: all topics leaves out what may not be described", key: kmsg.OffsetFetch,
			deny: d(topic(describe, topicT)), maxV: -1,
			req: func(f *fixture) kmsg.Request {
				r := offsetFetchReq(f, groupG).(*kmsg.OffsetFetchRequest)
				r.Topics, r.Groups[0].Topics = nil, nil
				return r
			},
			verify: func(t *testing.T, f *fixture, resp kmsg.Response) {
				r := resp.(*kmsg.OffsetFetchResponse)
				wantCode(t, "OffsetFetch", r.Groups[0].ErrorCode, noErrE)
				for _, tp := range r.Groups[0].Topics {
					if tp.Topic == topicT || tp.TopicID == f.topicID {
						t.Errorf("OffsetFetch of all topics shows %s", topicT)
					}
				}
			}},
		codeRow("OffsetFetch (v7): Describe on the group", kmsg.OffsetFetch, d(group(describe, groupG)), 7,
			func(f *fixture) kmsg.Request { return offsetFetchReq(f, groupG) },
			func(resp kmsg.Response) int16 { c, _ := offsetFetchCodes(resp); return c }, gaf, nil),
		// ConsumerGroupHeartbeat
		codeRow("ConsumerGroupHeartbeat: Read on the group", kmsg.ConsumerGroupHeartbeat, d(group(read, "cg-new")), -1,
			func(*fixture) kmsg.Request { return cgHeartbeatReq("cg-new") },
			func(resp kmsg.Response) int16 { return resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode }, gaf, groupList),
		codeRow("ConsumerGroupHeartbeat: Describe on each subscribed topic", kmsg.ConsumerGroupHeartbeat, d(topic(describe, topicT)), -1,
			func(*fixture) kmsg.Request { return cgHeartbeatReq("cg-new") },
			func(resp kmsg.Response) int16 { return resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode }, taf, groupList),
		{name: "ConsumerGroupHeartbeat: a regex matches only topics that may be described", key: kmsg.ConsumerGroupHeartbeat,
			deny: d(topic(describe, topicT2)), maxV: -1,
			req: func(*fixture) kmsg.Request {
				r := cgHeartbeatReq("cg-regex").(*kmsg.ConsumerGroupHeartbeatRequest)
				r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, strp("t2?")
				return r
			},
			verify: func(t *testing.T, f *fixture, resp kmsg.Response) {
				r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
				wantCode(t, "ConsumerGroupHeartbeat", r.ErrorCode, noErrE)
				var ids [][16]byte
				if r.Assignment != nil {
					for _, tp := range r.Assignment.Topics {
						ids = append(ids, tp.TopicID)
					}
				}
				if len(ids) != 1 || ids[0] != f.topicID {
					t.Errorf("regex t2? assigned topics %x, want only %s (%x)", ids, topicT, f.topicID)
				}
			}},
		// DescribeGroups, ListGroups, DeleteGroups, OffsetDelete
		codeRow("DescribeGroups: Describe on the group", kmsg.DescribeGroups, d(group(describe, groupG)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrDescribeGroupsRequest()
				r.Groups = []string{groupG}
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode }, gaf, nil),
		{name: "ListGroups: without Describe on the cluster, only groups that may be described", key: kmsg.ListGroups,
			deny: d(cluster(describe), group(describe, groupG)), maxV: -1,
			req: func(*fixture) kmsg.Request { return kmsg.NewPtrListGroupsRequest() },
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				names := listed(resp)
				if contains(names, groupG) || !contains(names, groupCG) {
					t.Errorf("ListGroups lists %v: want %s left out and %s in", names, groupG, groupCG)
				}
			}},
		{name: "ListGroups: Describe on the cluster lists every group", key: kmsg.ListGroups,
			deny: d(group(describe, groupG)), maxV: -1, mayNotAsk: true,
			req: func(*fixture) kmsg.Request { return kmsg.NewPtrListGroupsRequest() },
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				if names := listed(resp); !contains(names, groupG) {
					t.Errorf("ListGroups with Describe on the cluster lists %v, without %s", names, groupG)
				}
			}},
		codeRow("DeleteGroups: Delete on the group", kmsg.DeleteGroups, d(group(del, groupG)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrDeleteGroupsRequest()
				r.Groups = []string{groupG}
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode }, gaf, committedG),
		codeRow("OffsetDelete: Delete on the group", kmsg.OffsetDelete, d(group(del, groupG)), -1,
			offsetDeleteReq, func(resp kmsg.Response) int16 { return resp.(*kmsg.OffsetDeleteResponse).ErrorCode }, gaf, committedG),
		codesRow("OffsetDelete: Read on each topic", kmsg.OffsetDelete, d(topic(read, topicT)), -1,
			offsetDeleteReq, func(resp kmsg.Response) []int16 {
				var out []int16
				for _, t := range resp.(*kmsg.OffsetDeleteResponse).Topics {
					for _, p := range t.Partitions {
						out = append(out, p.ErrorCode)
					}
				}
				return out
			}, taf, committedG),
		// ConsumerGroupDescribe
		codeRow("ConsumerGroupDescribe: Describe on the group", kmsg.ConsumerGroupDescribe, d(group(describe, groupCG)), -1,
			cgDescribeReq, func(resp kmsg.Response) int16 { return resp.(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode }, gaf, nil),
		{name: "ConsumerGroupDescribe: Describe on every topic the group names", key: kmsg.ConsumerGroupDescribe,
			deny: d(topic(describe, topicT)), maxV: -1, req: cgDescribeReq,
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				g := resp.(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
				wantCode(t, "ConsumerGroupDescribe", g.ErrorCode, taf)
				if len(g.Members) != 0 {
					t.Errorf("ConsumerGroupDescribe shows %d members of a group naming a denied topic", len(g.Members))
				}
			}},
		// Producers and transactions
		codesRow("DescribeProducers: Read on the topic", kmsg.DescribeProducers, d(topic(read, topicT)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrDescribeProducersRequest()
				rt := kmsg.NewDescribeProducersRequestTopic()
				rt.Topic, rt.Partitions = topicT, []int32{0}
				r.Topics = append(r.Topics, rt)
				return r
			}, func(resp kmsg.Response) []int16 {
				var out []int16
				for _, t := range resp.(*kmsg.DescribeProducersResponse).Topics {
					for _, p := range t.Partitions {
						out = append(out, p.ErrorCode)
					}
				}
				return out
			}, taf, nil),
		codeRow("DescribeTransactions: Describe on the transactional id", kmsg.DescribeTransactions, d(txnID(describe, txnTX)), -1,
			describeTxnReq, func(resp kmsg.Response) int16 {
				return resp.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
			}, tiaf, nil),
		{name: "DescribeTransactions: partitions of topics that may not be described are left out", key: kmsg.DescribeTransactions,
			deny: d(topic(describe, topicT)), maxV: -1, req: describeTxnReq,
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				st := resp.(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
				wantCode(t, "DescribeTransactions", st.ErrorCode, noErrE)
				for _, tp := range st.Topics {
					if tp.Topic == topicT {
						t.Errorf("DescribeTransactions shows partitions of %s", topicT)
					}
				}
			}},
		{name: "ListTransactions: only transactional ids that may be described", key: kmsg.ListTransactions,
			deny: d(txnID(describe, txnTX)), maxV: -1,
			req: func(*fixture) kmsg.Request { return kmsg.NewPtrListTransactionsRequest() },
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				for _, s := range resp.(*kmsg.ListTransactionsResponse).TransactionStates {
					if s.TransactionalID == txnTX {
						t.Errorf("ListTransactions lists %s", txnTX)
					}
				}
			}},
		// Cluster administration
		codeRow("ElectLeaders: Alter on the cluster", kmsg.ElectLeaders, d(cluster(alter)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrElectLeadersRequest()
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic, rt.Partitions = topicT, []int32{0}
				r.Topics, r.TimeoutMillis = append(r.Topics, rt), 5000
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.ElectLeadersResponse).ErrorCode }, caf, nil),
		codeRow("AlterPartitionReassignments: Alter on the cluster", kmsg.AlterPartitionAssignments, d(cluster(alter)), -1,
			func(f *fixture) kmsg.Request {
				r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
				rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
				rt.Topic = topicT
				rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
				rp.Replicas = []int32{f.node}
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics, r.TimeoutMillis = append(r.Topics, rt), 5000
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode }, caf, nil),
		codeRow("ListPartitionReassignments: Describe on the cluster", kmsg.ListPartitionReassignments, d(cluster(describe)), -1,
			func(*fixture) kmsg.Request { return kmsg.NewPtrListPartitionReassignmentsRequest() },
			func(resp kmsg.Response) int16 { return resp.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode }, caf, nil),
		codeRow("ListConfigResources: DescribeConfigs on the cluster", kmsg.ListConfigResources, d(cluster(descCfg)), -1,
			func(*fixture) kmsg.Request { return kmsg.NewPtrListConfigResourcesRequest() },
			func(resp kmsg.Response) int16 { return resp.(*kmsg.ListConfigResourcesResponse).ErrorCode }, caf, nil),
		codeRow("UnregisterBroker: Alter on the cluster", kmsg.UnregisterBroker, d(cluster(alter)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrUnregisterBrokerRequest()
				r.BrokerID = 4242 // allowed: BROKER_ID_NOT_REGISTERED, nothing changes
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.UnregisterBrokerResponse).ErrorCode }, caf, nil),
		// KIP-714: no ACL, as in Kafka; any client may ask and push.
		{name: "GetTelemetrySubscriptions: no ACL", key: kmsg.GetTelemetrySubscriptions, maxV: -1, asksNothing: true,
			req: func(*fixture) kmsg.Request { return kmsg.NewPtrGetTelemetrySubscriptionsRequest() },
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				wantCode(t, "GetTelemetrySubscriptions", resp.(*kmsg.GetTelemetrySubscriptionsResponse).ErrorCode, &kerr.Error{})
			}},
		{name: "PushTelemetry: no ACL", key: kmsg.PushTelemetry, maxV: -1, asksNothing: true,
			req: func(*fixture) kmsg.Request {
				r := kmsg.NewPtrPushTelemetryRequest()
				r.ClientInstanceID = [16]byte{1} // unknown here: UNKNOWN_SUBSCRIPTION_ID, nothing kept
				return r
			},
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				wantCode(t, "PushTelemetry", resp.(*kmsg.PushTelemetryResponse).ErrorCode, kerr.UnknownSubscriptionID)
			}},
		// KIP-853: the allowed requests name a node that is not a broker and change nothing.
		codeRow("AddRaftVoter: Alter on the cluster", kmsg.AddRaftVoter, d(cluster(alter)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrAddRaftVoterRequest()
				r.VoterID = 4242
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.AddRaftVoterResponse).ErrorCode }, caf, nil),
		codeRow("RemoveRaftVoter: Alter on the cluster", kmsg.RemoveRaftVoter, d(cluster(alter)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrRemoveRaftVoterRequest()
				r.VoterID = 4242
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.RemoveRaftVoterResponse).ErrorCode }, caf, nil),
		codeRow("UpdateRaftVoter: ClusterAction on the cluster", kmsg.UpdateRaftVoter, d(cluster(action)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrUpdateRaftVoterRequest()
				r.VoterID = 4242
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.UpdateRaftVoterResponse).ErrorCode }, caf, nil),
		codeRow("UpdateFeatures: Alter on the cluster", kmsg.UpdateFeatures, d(cluster(alter)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrUpdateFeaturesRequest()
				fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
				// The level a new cluster has: allowed, it changes nothing.
				fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = "transaction.version", 2, 1
				r.FeatureUpdates = append(r.FeatureUpdates, fu)
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.UpdateFeaturesResponse).ErrorCode }, caf, nil),
		{name: "DescribeCluster: authorized operations are 0 without Describe on the cluster", key: kmsg.DescribeCluster,
			deny: d(cluster(describe)), maxV: -1,
			req: func(*fixture) kmsg.Request {
				r := kmsg.NewPtrDescribeClusterRequest()
				r.IncludeClusterAuthorizedOperations = true
				return r
			},
			verify: func(t *testing.T, _ *fixture, resp kmsg.Response) {
				r := resp.(*kmsg.DescribeClusterResponse)
				wantCode(t, "DescribeCluster", r.ErrorCode, noErrE)
				if r.ClusterAuthorizedOperations != 0 {
					t.Errorf("DescribeCluster reports operations %b without Describe on the cluster", r.ClusterAuthorizedOperations)
				}
			}},
		codeRow("DescribeQuorum: Describe on the cluster", kmsg.DescribeQuorum, d(cluster(describe)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrDescribeQuorumRequest()
				rt := kmsg.NewDescribeQuorumRequestTopic()
				rt.Topic = "__cluster_metadata"
				rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
				r.Topics = append(r.Topics, rt)
				return r
			}, func(resp kmsg.Response) int16 { return resp.(*kmsg.DescribeQuorumResponse).ErrorCode }, caf, nil),
		codeRow("DescribeLogDirs: Describe on the cluster", kmsg.DescribeLogDirs, d(cluster(describe)), -1,
			func(*fixture) kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() },
			func(resp kmsg.Response) int16 { return resp.(*kmsg.DescribeLogDirsResponse).ErrorCode }, caf, nil),
		codesRow("AlterReplicaLogDirs: Alter on the cluster", kmsg.AlterReplicaLogDirs, d(cluster(alter)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrAlterReplicaLogDirsRequest()
				dir := kmsg.NewAlterReplicaLogDirsRequestDir()
				dir.Dir = "/no/such/log/dir" // allowed: LOG_DIR_NOT_FOUND, nothing moves
				dt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
				dt.Topic, dt.Partitions = topicT, []int32{0}
				dir.Topics = append(dir.Topics, dt)
				r.Dirs = append(r.Dirs, dir)
				return r
			}, func(resp kmsg.Response) []int16 {
				var out []int16
				for _, t := range resp.(*kmsg.AlterReplicaLogDirsResponse).Topics {
					for _, p := range t.Partitions {
						out = append(out, p.ErrorCode)
					}
				}
				return out
			}, caf, nil),
		codeRow("DescribeClientQuotas: DescribeConfigs on the cluster", kmsg.DescribeClientQuotas, d(cluster(descCfg)), -1,
			func(*fixture) kmsg.Request { return kmsg.NewPtrDescribeClientQuotasRequest() },
			func(resp kmsg.Response) int16 { return resp.(*kmsg.DescribeClientQuotasResponse).ErrorCode }, caf, nil),
		codesRow("AlterClientQuotas: AlterConfigs on the cluster", kmsg.AlterClientQuotas, d(cluster(alterCfg)), -1,
			func(*fixture) kmsg.Request {
				r := kmsg.NewPtrAlterClientQuotasRequest()
				e := kmsg.NewAlterClientQuotasRequestEntry()
				c := kmsg.NewAlterClientQuotasRequestEntryEntity()
				c.Type, c.Name = "client-id", strp("authz")
				e.Entity = append(e.Entity, c)
				op := kmsg.NewAlterClientQuotasRequestEntryOp()
				op.Key, op.Value = "producer_byte_rate", 1024
				e.Ops = append(e.Ops, op)
				r.Entries = append(r.Entries, e)
				return r
			}, func(resp kmsg.Response) []int16 {
				var out []int16
				for _, e := range resp.(*kmsg.AlterClientQuotasResponse).Entries {
					out = append(out, e.ErrorCode)
				}
				return out
			}, caf, quotasNow),
	}, shareRows()...)
}

// noErrE is "no error" for wantCode.
var noErrE = &kerr.Error{Message: "NONE", Code: 0}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func equal(a, b any) bool { return reflect.DeepEqual(a, b) }

// addPartitionsV4 is the broker form of AddPartitionsToTxn for t2 in tx.
func addPartitionsV4(f *fixture, verifyOnly bool) kmsg.Request {
	r := kmsg.NewPtrAddPartitionsToTxnRequest()
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = txnTX, f.pid, f.epoch, verifyOnly
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = topicT2, []int32{0}
	tx.Topics = append(tx.Topics, tt)
	r.Transactions = append(r.Transactions, tx)
	return r
}
