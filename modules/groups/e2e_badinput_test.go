package groups_test

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// consumerProtocols is what a consumer subscribed to topics sends in JoinGroup.
func consumerProtocols(topics ...string) []kmsg.JoinGroupRequestProtocol {
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = topics
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", md.AppendTo(nil)
	return []kmsg.JoinGroupRequestProtocol{p}
}

func joinReq(version int16, group, memberID string, protos []kmsg.JoinGroupRequestProtocol) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version, r.Group, r.MemberID = version, group, memberID
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10_000, 10_000
	r.ProtocolType, r.Protocols = "consumer", protos
	return r
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	wc := int16(0)
	if want != nil {
		wc = want.Code
	}
	if got != wc {
		t.Errorf("%s: %s, want %s", what, codeName(got), codeName(wc))
	}
}

// rawMember is a group member driven by hand over a raw connection.
type rawMember struct {
	id  string
	gen int32
}

// joinAsOnlyMember joins group (JoinGroup v5: MEMBER_ID_REQUIRED, then again with the
// id) as its only member and, as leader, syncs an assignment of partition 0 of topic.
func joinAsOnlyMember(t *testing.T, rc *rawConn, group, topic string) rawMember {
	t.Helper()
	j := joinReq(5, group, "", consumerProtocols(topic))
	r1 := rc.do(j).(*kmsg.JoinGroupResponse)
	wantCode(t, "first JoinGroup v5 without a member id", r1.ErrorCode, kerr.MemberIDRequired)
	if r1.MemberID == "" {
		t.Fatal("MEMBER_ID_REQUIRED without a member id")
	}
	j.MemberID = r1.MemberID
	r2 := rc.do(j).(*kmsg.JoinGroupResponse)
	wantCode(t, "JoinGroup v5 with the given member id", r2.ErrorCode, nil)
	if r2.MemberID != r1.MemberID || r2.LeaderID != r1.MemberID || r2.Generation < 1 || len(r2.Members) != 1 {
		t.Fatalf("join response: member %q leader %q generation %d members %d; want member and leader %q", r2.MemberID, r2.LeaderID, r2.Generation, len(r2.Members), r1.MemberID)
	}
	m := rawMember{id: r2.MemberID, gen: r2.Generation}
	a := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = topic, []int32{0}
	a.Topics = append(a.Topics, at)
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version, s.Group, s.Generation, s.MemberID = 3, group, m.gen, m.id
	ga := kmsg.NewSyncGroupRequestGroupAssignment()
	ga.MemberID, ga.MemberAssignment = m.id, a.AppendTo(nil)
	s.GroupAssignment = append(s.GroupAssignment, ga)
	sr := rc.do(s).(*kmsg.SyncGroupResponse)
	wantCode(t, "leader SyncGroup", sr.ErrorCode, nil)
	if !bytes.Equal(sr.MemberAssignment, ga.MemberAssignment) {
		t.Fatalf("SyncGroup gave assignment %x, want %x", sr.MemberAssignment, ga.MemberAssignment)
	}
	return m
}

func commitReq(version int16, group, member string, gen int32, topic string, partition int32, metadata *string) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.MemberID, r.Generation = version, group, member, gen
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = topic
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.Metadata = partition, 7, metadata
	ct.Partitions = append(ct.Partitions, cp)
	r.Topics = append(r.Topics, ct)
	return r
}

func commitCode(rc *rawConn, r *kmsg.OffsetCommitRequest) int16 {
	resp := rc.do(r).(*kmsg.OffsetCommitResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		rc.t.Fatalf("OffsetCommit response shape: %+v", resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestClassicBadInput sends malformed, stale and hostile group requests at exact
// versions over a raw connection; each gets the error Kafka gives, and the broker keeps
// serving.
func TestClassicBadInput(t *testing.T) {
	const topic = "bad"
	b := testbroker.Start(t, testbroker.WithConfig(fastGroupConfig+"  group.max.size: \"3\"\n"))
	createTopic(t, b.Admin(t), topic, 2)
	createTopic(t, b.Admin(t), "bad-other", 1)
	rc := dialRaw(t, b.Addr, "raw")

	// Create __consumer_offsets (as a client's first FindCoordinator does).
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 2, "warmup"
	wantCode(t, "FindCoordinator v2", rc.do(fc).(*kmsg.FindCoordinatorResponse).ErrorCode, nil)

	t.Run("EmptyGroupID", func(t *testing.T) {
		for _, v := range []int16{0, 5, 9} {
			r := rc.do(joinReq(v, "", "", consumerProtocols(topic))).(*kmsg.JoinGroupResponse)
			wantCode(t, "JoinGroup v"+strconv.Itoa(int(v))+" with an empty group id", r.ErrorCode, kerr.InvalidGroupID)
		}
	})

	t.Run("UnknownGroup", func(t *testing.T) {
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version, hb.Group, hb.Generation, hb.MemberID = 4, "g-unknown", 1, "m-1"
		wantCode(t, "Heartbeat to an unknown group", rc.do(hb).(*kmsg.HeartbeatResponse).ErrorCode, kerr.UnknownMemberID)
		s := kmsg.NewPtrSyncGroupRequest()
		s.Version, s.Group, s.Generation, s.MemberID = 5, "g-unknown", 1, "m-1"
		wantCode(t, "SyncGroup to an unknown group", rc.do(s).(*kmsg.SyncGroupResponse).ErrorCode, kerr.UnknownMemberID)
		l := kmsg.NewPtrLeaveGroupRequest()
		l.Version, l.Group, l.MemberID = 1, "g-unknown", "m-1"
		wantCode(t, "LeaveGroup v1 from an unknown group", rc.do(l).(*kmsg.LeaveGroupResponse).ErrorCode, kerr.UnknownMemberID)
		// An unknown member id of a known group is also UNKNOWN_MEMBER_ID on join.
		r := rc.do(joinReq(5, "g-unknown", "m-made-up", consumerProtocols(topic))).(*kmsg.JoinGroupResponse)
		wantCode(t, "JoinGroup with a made-up member id", r.ErrorCode, kerr.UnknownMemberID)
	})

	t.Run("MemberLifecycle", func(t *testing.T) {
		const group = "g-member"
		m := joinAsOnlyMember(t, rc, group, topic)

		// JoinGroup v9 (flexible) without a member id also needs one.
		r := rc.do(joinReq(9, "g-flex", "", consumerProtocols(topic))).(*kmsg.JoinGroupResponse)
		wantCode(t, "JoinGroup v9 without a member id", r.ErrorCode, kerr.MemberIDRequired)
		if r.MemberID == "" {
			t.Error("JoinGroup v9: MEMBER_ID_REQUIRED without a member id")
		}

		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version, hb.Group, hb.Generation, hb.MemberID = 4, group, m.gen, m.id
		wantCode(t, "Heartbeat", rc.do(hb).(*kmsg.HeartbeatResponse).ErrorCode, nil)
		hb.Generation = m.gen - 1
		wantCode(t, "Heartbeat with a stale generation", rc.do(hb).(*kmsg.HeartbeatResponse).ErrorCode, kerr.IllegalGeneration)
		hb.Generation, hb.MemberID = m.gen, "someone-else"
		wantCode(t, "Heartbeat with an unknown member", rc.do(hb).(*kmsg.HeartbeatResponse).ErrorCode, kerr.UnknownMemberID)

		md := strings.Repeat("m", 4096)
		wantCode(t, "member commit", commitCode(rc, commitReq(8, group, m.id, m.gen, topic, 0, &md)), nil)
		md += "m"
		wantCode(t, "commit with 4097 bytes of metadata", commitCode(rc, commitReq(8, group, m.id, m.gen, topic, 0, &md)), kerr.OffsetMetadataTooLarge)
		wantCode(t, "commit to a nonexistent topic", commitCode(rc, commitReq(8, group, m.id, m.gen, "no-such-topic", 0, nil)), kerr.UnknownTopicOrPartition)
		wantCode(t, "commit to a nonexistent partition", commitCode(rc, commitReq(8, group, m.id, m.gen, topic, 2, nil)), kerr.UnknownTopicOrPartition)
		wantCode(t, "commit to partition -1", commitCode(rc, commitReq(8, group, m.id, m.gen, topic, -1, nil)), kerr.UnknownTopicOrPartition)
		wantCode(t, "member commit with a wrong generation", commitCode(rc, commitReq(8, group, m.id, m.gen+1, topic, 0, nil)), kerr.IllegalGeneration)
		wantCode(t, "commit by an unknown member", commitCode(rc, commitReq(8, group, "someone-else", m.gen, topic, 0, nil)), kerr.UnknownMemberID)
		wantCode(t, "simple commit to a live group", commitCode(rc, commitReq(8, group, "", -1, topic, 0, nil)), kerr.UnknownMemberID)
		wantCode(t, "commit v0 (no member fields) to a live group", commitCode(rc, commitReq(0, group, "", -1, topic, 1, nil)), kerr.UnknownMemberID)

		// The rejected commits left the accepted one alone.
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Version, of.Group = 5, group
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = topic, []int32{0, 1}
		of.Topics = append(of.Topics, ft)
		fr := rc.do(of).(*kmsg.OffsetFetchResponse)
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 2 || fr.Topics[0].Partitions[0].Offset != 7 ||
			fr.Topics[0].Partitions[0].Metadata == nil || len(*fr.Topics[0].Partitions[0].Metadata) != 4096 || fr.Topics[0].Partitions[1].Offset != -1 {
			t.Errorf("OffsetFetch after the commits: %+v", fr.Topics)
		}

		// OffsetDelete: refused for the topic the member subscribes to, allowed for
		// another topic it committed.
		wantCode(t, "member commit of an unsubscribed topic", commitCode(rc, commitReq(8, group, m.id, m.gen, "bad-other", 0, nil)), nil)
		od := kmsg.NewPtrOffsetDeleteRequest()
		od.Group = group
		for _, tp := range []string{topic, "bad-other"} {
			dt := kmsg.NewOffsetDeleteRequestTopic()
			dt.Topic = tp
			dp := kmsg.NewOffsetDeleteRequestTopicPartition()
			dt.Partitions = append(dt.Partitions, dp)
			od.Topics = append(od.Topics, dt)
		}
		odr := rc.do(od).(*kmsg.OffsetDeleteResponse)
		if odr.ErrorCode != 0 || len(odr.Topics) != 2 {
			t.Fatalf("OffsetDelete: %s, %d topics", codeName(odr.ErrorCode), len(odr.Topics))
		}
		wantCode(t, "OffsetDelete of the subscribed topic", odr.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
		wantCode(t, "OffsetDelete of an unsubscribed topic", odr.Topics[1].Partitions[0].ErrorCode, nil)
		of.Topics[0].Partitions = []int32{0}
		of.Topics = append(of.Topics, kmsg.OffsetFetchRequestTopic{Topic: "bad-other", Partitions: []int32{0}})
		fr = rc.do(of).(*kmsg.OffsetFetchResponse)
		if len(fr.Topics) != 2 || fr.Topics[0].Partitions[0].Offset != 7 || fr.Topics[1].Partitions[0].Offset != -1 {
			t.Errorf("OffsetFetch after OffsetDelete: %+v", fr.Topics)
		}

		l := kmsg.NewPtrLeaveGroupRequest()
		l.Version, l.Group = 3, group
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = m.id
		l.Members = append(l.Members, lm)
		lr := rc.do(l).(*kmsg.LeaveGroupResponse)
		if lr.ErrorCode != 0 || len(lr.Members) != 1 || lr.Members[0].ErrorCode != 0 {
			t.Errorf("LeaveGroup v3: %+v", lr)
		}
		wantCode(t, "simple commit to the now empty group", commitCode(rc, commitReq(8, group, "", -1, topic, 1, nil)), nil)
	})

	t.Run("OversizedMetadata", func(t *testing.T) {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", make([]byte, 257<<10)
		r := rc.do(joinReq(3, "g-big", "", []kmsg.JoinGroupRequestProtocol{p})).(*kmsg.JoinGroupResponse)
		if r.ErrorCode == 0 {
			t.Errorf("JoinGroup with 257 KiB of protocol metadata succeeded")
		}
		// Many protocols are refused too.
		var many []kmsg.JoinGroupRequestProtocol
		for i := range 1000 {
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name = "p" + strconv.Itoa(i)
			many = append(many, p)
		}
		r = rc.do(joinReq(3, "g-big", "", many)).(*kmsg.JoinGroupResponse)
		if r.ErrorCode == 0 {
			t.Errorf("JoinGroup with 1000 protocols succeeded")
		}
		// Still serving, and the group did not keep the refused joiner.
		m := joinAsOnlyMember(t, rc, "g-big", topic)
		if m.gen != 1 {
			t.Errorf("first successful member got generation %d, want 1", m.gen)
		}
	})

	t.Run("BadAssignments", func(t *testing.T) {
		const group = "g-assign"
		// An assignment for a member that is not in the group is ignored (as in
		// Kafka): the real member still gets its own.
		j := joinReq(5, group, "", consumerProtocols(topic))
		j.MemberID = rc.do(j).(*kmsg.JoinGroupResponse).MemberID
		jr := rc.do(j).(*kmsg.JoinGroupResponse)
		wantCode(t, "join", jr.ErrorCode, nil)
		s := kmsg.NewPtrSyncGroupRequest()
		s.Version, s.Group, s.Generation, s.MemberID = 5, group, jr.Generation, jr.MemberID
		s.ProtocolType, s.Protocol = ptr("consumer"), ptr("range")
		for _, id := range []string{"ghost", jr.MemberID} {
			ga := kmsg.NewSyncGroupRequestGroupAssignment()
			ga.MemberID, ga.MemberAssignment = id, []byte(id)
			s.GroupAssignment = append(s.GroupAssignment, ga)
		}
		sr := rc.do(s).(*kmsg.SyncGroupResponse)
		wantCode(t, "SyncGroup assigning a non-member", sr.ErrorCode, nil)
		if string(sr.MemberAssignment) != jr.MemberID {
			t.Errorf("leader got assignment %q, want its own %q", sr.MemberAssignment, jr.MemberID)
		}
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Version, dg.Groups = 5, []string{group}
		d := rc.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0]
		if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != jr.MemberID {
			t.Errorf("group after a sync naming a ghost: state %s, %d members", d.State, len(d.Members))
		}

		// A > 1 MiB assignment is refused. Make the leader sync again in a new
		// generation: rejoin with different metadata to force a rebalance.
		j2 := joinReq(5, group, jr.MemberID, consumerProtocols(topic, "x"))
		jr2 := rc.do(j2).(*kmsg.JoinGroupResponse)
		wantCode(t, "rejoin", jr2.ErrorCode, nil)
		s.Generation = jr2.Generation
		s.GroupAssignment = s.GroupAssignment[:1]
		s.GroupAssignment[0].MemberID = jr.MemberID
		s.GroupAssignment[0].MemberAssignment = make([]byte, 1<<20+1)
		sr = rc.do(s).(*kmsg.SyncGroupResponse)
		if sr.ErrorCode == 0 {
			t.Errorf("SyncGroup with a 1 MiB + 1 assignment succeeded")
		}
		d = rc.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0]
		for _, m := range d.Members {
			if len(m.MemberAssignment) > 1<<20 {
				t.Errorf("member %s holds a %d-byte assignment", m.MemberID, len(m.MemberAssignment))
			}
		}
	})

	t.Run("Rebalance", func(t *testing.T) {
		const group = "g-rb"
		a := joinAsOnlyMember(t, rc, group, topic)
		rc2 := dialRaw(t, b.Addr, "raw2")

		for _, ms := range []int32{999, 1_800_001} {
			j := joinReq(5, group, "", consumerProtocols(topic))
			j.SessionTimeoutMillis = ms
			wantCode(t, "JoinGroup with session timeout "+strconv.Itoa(int(ms)), rc2.do(j).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InvalidSessionTimeout)
		}
		j := joinReq(5, group, "", consumerProtocols(topic))
		j.ProtocolType = "connect"
		wantCode(t, "JoinGroup with another protocol type", rc2.do(j).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)
		j = joinReq(5, group, "", consumerProtocols(topic))
		j.Protocols[0].Name = "roundrobin"
		wantCode(t, "JoinGroup with no protocol in common", rc2.do(j).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)

		// B joins: its join waits for A to rejoin.
		jb := joinReq(5, group, "", consumerProtocols(topic))
		jb.MemberID = rc2.do(jb).(*kmsg.JoinGroupResponse).MemberID
		corrB := rc2.send(jb)
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version, hb.Group, hb.Generation, hb.MemberID = 4, group, a.gen, a.id
		waitFor(t, 5*time.Second, "the group to start rebalancing", func() string {
			if code := rc.do(hb).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.RebalanceInProgress.Code {
				return "heartbeat: " + codeName(code)
			}
			return ""
		})
		wantCode(t, "commit while PreparingRebalance", commitCode(rc, commitReq(8, group, a.id, a.gen, topic, 0, nil)), nil)
		ja := rc.do(joinReq(5, group, a.id, consumerProtocols(topic))).(*kmsg.JoinGroupResponse)
		jbr := rc2.recv(jb, corrB).(*kmsg.JoinGroupResponse)
		wantCode(t, "A's rejoin", ja.ErrorCode, nil)
		wantCode(t, "B's join", jbr.ErrorCode, nil)
		if ja.Generation != a.gen+1 || jbr.Generation != ja.Generation || ja.LeaderID != a.id || len(ja.Members) != 2 || len(jbr.Members) != 0 {
			t.Fatalf("rebalance: A gen %d leader %q members %d; B gen %d members %d", ja.Generation, ja.LeaderID, len(ja.Members), jbr.Generation, len(jbr.Members))
		}
		gen := ja.Generation

		// CompletingRebalance: commits wait for the assignment.
		wantCode(t, "commit while CompletingRebalance", commitCode(rc2, commitReq(8, group, jbr.MemberID, gen, topic, 1, nil)), kerr.RebalanceInProgress)
		wantCode(t, "commit with the previous generation", commitCode(rc, commitReq(8, group, a.id, a.gen, topic, 0, nil)), kerr.IllegalGeneration)
		sb := kmsg.NewPtrSyncGroupRequest()
		sb.Version, sb.Group, sb.Generation, sb.MemberID = 5, group, gen, jbr.MemberID
		corrSB := rc2.send(sb)
		sa := kmsg.NewPtrSyncGroupRequest()
		sa.Version, sa.Group, sa.Generation, sa.MemberID = 5, group, gen-1, a.id
		wantCode(t, "SyncGroup with the previous generation", rc.do(sa).(*kmsg.SyncGroupResponse).ErrorCode, kerr.IllegalGeneration)
		sa.Generation, sa.ProtocolType, sa.Protocol = gen, ptr("consumer"), ptr("roundrobin")
		wantCode(t, "SyncGroup v5 naming another protocol", rc.do(sa).(*kmsg.SyncGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)
		sa.Protocol = ptr("range")
		for _, id := range []string{a.id, jbr.MemberID} {
			ga := kmsg.NewSyncGroupRequestGroupAssignment()
			ga.MemberID, ga.MemberAssignment = id, []byte("for "+id)
			sa.GroupAssignment = append(sa.GroupAssignment, ga)
		}
		sar := rc.do(sa).(*kmsg.SyncGroupResponse)
		sbr := rc2.recv(sb, corrSB).(*kmsg.SyncGroupResponse)
		if sar.ErrorCode != 0 || sbr.ErrorCode != 0 || string(sar.MemberAssignment) != "for "+a.id || string(sbr.MemberAssignment) != "for "+jbr.MemberID {
			t.Errorf("syncs: A %s %q, B %s %q", codeName(sar.ErrorCode), sar.MemberAssignment, codeName(sbr.ErrorCode), sbr.MemberAssignment)
		}
		wantCode(t, "commit once Stable", commitCode(rc2, commitReq(8, group, jbr.MemberID, gen, topic, 1, nil)), nil)
	})

	t.Run("MaxSize", func(t *testing.T) {
		// group.max.size 3 counts pending (KIP-394) members.
		for i := range 4 {
			r := rc.do(joinReq(5, "g-max", "", consumerProtocols(topic))).(*kmsg.JoinGroupResponse)
			want := kerr.MemberIDRequired
			if i == 3 {
				want = kerr.GroupMaxSizeReached
			}
			wantCode(t, "JoinGroup "+strconv.Itoa(i+1), r.ErrorCode, want)
		}
	})

	t.Run("OffsetFetch", func(t *testing.T) {
		// Two groups with offsets (simple commits), one unknown, in one v8 request.
		for i, g := range []string{"g-of-a", "g-of-b"} {
			wantCode(t, "simple commit", commitCode(rc, commitReq(8, g, "", -1, topic, int32(i), nil)), nil)
		}
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Version = 8
		for _, g := range []string{"g-of-a", "g-of-b", "g-of-unknown"} {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = g
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.Topic, rt.Partitions = topic, []int32{0, 1}
			rg.Topics = append(rg.Topics, rt)
			of.Groups = append(of.Groups, rg)
		}
		all := kmsg.NewOffsetFetchRequestGroup()
		all.Group = "g-of-b" // nil topics: every committed offset
		of.Groups = append(of.Groups, all)
		fr := rc.do(of).(*kmsg.OffsetFetchResponse)
		if len(fr.Groups) != 4 {
			t.Fatalf("OffsetFetch v8 answered %d groups, want 4", len(fr.Groups))
		}
		want := map[string][]int64{"g-of-a": {7, -1}, "g-of-b": {-1, 7}, "g-of-unknown": {-1, -1}}
		for _, g := range fr.Groups[:3] {
			if g.ErrorCode != 0 || len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 2 {
				t.Errorf("group %s: %s, %d topics", g.Group, codeName(g.ErrorCode), len(g.Topics))
				continue
			}
			for i, p := range g.Topics[0].Partitions {
				if p.Offset != want[g.Group][i] || p.ErrorCode != 0 {
					t.Errorf("group %s partition %d: offset %d (%s), want %d", g.Group, p.Partition, p.Offset, codeName(p.ErrorCode), want[g.Group][i])
				}
			}
		}
		if g := fr.Groups[3]; g.ErrorCode != 0 || len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 1 ||
			g.Topics[0].Partitions[0].Partition != 1 || g.Topics[0].Partitions[0].Offset != 7 {
			t.Errorf("all offsets of g-of-b: %+v", g)
		}

		// v1 (single group) of an unknown group: -1, no error.
		of1 := kmsg.NewPtrOffsetFetchRequest()
		of1.Version, of1.Group = 1, "g-of-nobody"
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = topic, []int32{0}
		of1.Topics = append(of1.Topics, ft)
		r1 := rc.do(of1).(*kmsg.OffsetFetchResponse)
		if len(r1.Topics) != 1 || len(r1.Topics[0].Partitions) != 1 || r1.Topics[0].Partitions[0].Offset != -1 || r1.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Errorf("OffsetFetch v1 of an unknown group: %+v", r1.Topics)
		}
	})

	t.Run("FindCoordinator", func(t *testing.T) {
		host, portS, _ := net.SplitHostPort(b.Addr)
		port, _ := strconv.Atoi(portS)
		f0 := kmsg.NewPtrFindCoordinatorRequest()
		f0.Version, f0.CoordinatorKey = 0, "g-fc"
		r0 := rc.do(f0).(*kmsg.FindCoordinatorResponse)
		if r0.ErrorCode != 0 || r0.Host != host || r0.Port != int32(port) || r0.NodeID < 0 {
			t.Errorf("FindCoordinator v0: %s node %d %s:%d, want %s", codeName(r0.ErrorCode), r0.NodeID, r0.Host, r0.Port, b.Addr)
		}
		f4 := kmsg.NewPtrFindCoordinatorRequest()
		f4.Version, f4.CoordinatorKeys = 4, []string{"g-fc", "g-fc2", ""}
		r4 := rc.do(f4).(*kmsg.FindCoordinatorResponse)
		if len(r4.Coordinators) != 3 {
			t.Fatalf("FindCoordinator v4 with 3 keys: %d answers", len(r4.Coordinators))
		}
		for _, c := range r4.Coordinators[:2] {
			if c.ErrorCode != 0 || c.Host != host || c.Port != int32(port) || c.NodeID != r0.NodeID {
				t.Errorf("FindCoordinator v4 key %q: %s node %d %s:%d", c.Key, codeName(c.ErrorCode), c.NodeID, c.Host, c.Port)
			}
		}
		if c := r4.Coordinators[2]; c.Key != "" || c.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("FindCoordinator v4 empty key: %s", codeName(c.ErrorCode))
		}
		for _, tc := range []struct {
			typ  int8
			want *kerr.Error
		}{{1, nil}, {5, kerr.InvalidRequest}} { // 1: the transaction coordinator (a default module)
			f := kmsg.NewPtrFindCoordinatorRequest()
			f.Version, f.CoordinatorType, f.CoordinatorKeys = 4, tc.typ, []string{"k"}
			r := rc.do(f).(*kmsg.FindCoordinatorResponse)
			if len(r.Coordinators) != 1 {
				t.Fatalf("FindCoordinator v4 type %d: %d answers", tc.typ, len(r.Coordinators))
			}
			wantCode(t, "FindCoordinator v4 type "+strconv.Itoa(int(tc.typ)), r.Coordinators[0].ErrorCode, tc.want)
			if c := r.Coordinators[0]; tc.want == nil && (c.Host != host || c.Port != int32(port) || c.NodeID != r0.NodeID) {
				t.Errorf("FindCoordinator v4 type %d: node %d %s:%d", tc.typ, c.NodeID, c.Host, c.Port)
			}
			f3 := kmsg.NewPtrFindCoordinatorRequest()
			f3.Version, f3.CoordinatorType, f3.CoordinatorKey = 3, tc.typ, "k"
			wantCode(t, "FindCoordinator v3 type "+strconv.Itoa(int(tc.typ)), rc.do(f3).(*kmsg.FindCoordinatorResponse).ErrorCode, tc.want)
		}
	})
}

// TestClassicJoinFlood sends 10,000 JoinGroups without member ids (each a fresh
// client id) to one group. Each gets MEMBER_ID_REQUIRED and a pending member id; the
// pending members expire after their session timeout, so a real member's join
// completes soon after and the flood's ids are then unknown.
func TestClassicJoinFlood(t *testing.T) {
	const group, topic, n, conns = "g-flood", "flood", 10_000, 4
	b := testbroker.Start(t, testbroker.WithConfig(fastGroupConfig))
	createTopic(t, b.Admin(t), topic, 1)
	rc := dialRaw(t, b.Addr, "raw")
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 2, group
	wantCode(t, "FindCoordinator", rc.do(fc).(*kmsg.FindCoordinatorResponse).ErrorCode, nil)

	start := time.Now()
	var mu sync.Mutex
	ids := map[string]bool{}
	var wg sync.WaitGroup
	for c := range conns {
		fc := dialRaw(t, b.Addr, "flood")
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Pipeline: a writer sends every request, this goroutine reads the answers.
			reqs := make([]*kmsg.JoinGroupRequest, n/conns)
			corrs := make(chan int32, len(reqs))
			for i := range reqs {
				r := joinReq(5, group, "", consumerProtocols(topic))
				r.SessionTimeoutMillis = 1000
				reqs[i] = r
			}
			go func() {
				for i, r := range reqs {
					fc.f = kmsg.NewRequestFormatter(kmsg.FormatterClientID("flood-" + strconv.Itoa(c) + "-" + strconv.Itoa(i)))
					corrs <- fc.send(r)
				}
			}()
			for _, r := range reqs {
				resp, err := fc.tryRecv(r, <-corrs, 30*time.Second)
				if err != nil {
					t.Errorf("flood join: %v", err)
					return
				}
				jr := resp.(*kmsg.JoinGroupResponse)
				mu.Lock()
				if jr.ErrorCode != kerr.MemberIDRequired.Code || jr.MemberID == "" || ids[jr.MemberID] {
					t.Errorf("flood join: %s member %q (duplicate %v)", codeName(jr.ErrorCode), jr.MemberID, ids[jr.MemberID])
					mu.Unlock()
					return
				}
				ids[jr.MemberID] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d joins in %v", n, time.Since(start))

	// The group has no members: pending ones are not members.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 5, []string{group}
	if d := rc.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0]; len(d.Members) != 0 {
		t.Errorf("after the flood the group has %d members (state %s), want 0", len(d.Members), d.State)
	}

	// A real member's join waits for the pending members, which expire after 1s;
	// with a 10s rebalance timeout, completing within 5s shows they expired.
	joined := time.Now()
	m := joinAsOnlyMember(t, rc, group, topic)
	if took := time.Since(joined); took > 5*time.Second {
		t.Errorf("a real member's join took %v after the flood", took)
	}
	t.Logf("real member joined generation %d after %v", m.gen, time.Since(joined))
	for id := range ids {
		r := rc.do(joinReq(5, group, id, consumerProtocols(topic))).(*kmsg.JoinGroupResponse)
		wantCode(t, "JoinGroup with a flood member id after it expired", r.ErrorCode, kerr.UnknownMemberID)
		break
	}
	if d := rc.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0]; d.State != "Stable" || len(d.Members) != 1 {
		t.Errorf("group after the flood: state %s with %d members, want Stable with 1", d.State, len(d.Members))
	}
}
