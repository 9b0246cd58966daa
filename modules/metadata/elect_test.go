package metadata

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// TestPlanElection: the outcome of each election type, one partition per case.
func TestPlanElection(t *testing.T) {
	part := func(leader int32, replicas, isr []int32) kernel.PartitionImage {
		return kernel.PartitionImage{Leader: leader, LeaderEpoch: 2, PartitionEpoch: 4, Replicas: replicas, ISR: isr}
	}
	for _, tc := range []struct {
		name    string
		fenced  []int32
		p       kernel.PartitionImage
		typ     int8
		want    *kerr.Error // nil: elected
		leader  int32
		isr     []int32
		fenceIt bool // fence the chosen leader before Apply
	}{
		{"preferred leads", nil, part(1, []int32{1, 2}, []int32{1, 2}), electPreferred, kerr.ElectionNotNeeded, 0, nil, false},
		{"preferred back", nil, part(2, []int32{1, 2}, []int32{2, 1}), electPreferred, nil, 1, []int32{2, 1}, false},
		{"preferred not in ISR", nil, part(2, []int32{1, 2}, []int32{2}), electPreferred, kerr.PreferredLeaderNotAvailable, 0, nil, false},
		{"preferred fenced", []int32{1}, part(2, []int32{1, 2}, []int32{2, 1}), electPreferred, kerr.PreferredLeaderNotAvailable, 0, nil, false},
		{"preferred fenced before apply", nil, part(2, []int32{1, 2}, []int32{2, 1}), electPreferred, kerr.PreferredLeaderNotAvailable, 0, nil, true},
		{"unclean, leader live", nil, part(2, []int32{1, 2}, []int32{2}), electUnclean, kerr.ElectionNotNeeded, 0, nil, false},
		{"unclean, live ISR member", []int32{1}, part(-1, []int32{1, 2, 3}, []int32{1, 3}), electUnclean, nil, 3, []int32{1, 3}, false},
		{"unclean, outside the ISR", []int32{1}, part(-1, []int32{1, 2, 3}, []int32{1}), electUnclean, nil, 2, []int32{2}, false},
		{"unclean, nobody live", []int32{1, 2, 3}, part(-1, []int32{1, 2, 3}, []int32{1}), electUnclean, kerr.EligibleLeadersNotAvailable, 0, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := electState(t, tc.fenced, tc.p)
			tp := im.Topic("e")
			rec, err := planElection(im, tp, &tp.Partitions[0], tc.typ)
			if tc.want != nil && !tc.fenceIt {
				if !errors.Is(err, tc.want) || rec != nil {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := &image.State{Image: im, Regs: map[int32]image.BrokerReg{}}
			if tc.fenceIt {
				s, _ = s.Apply(9, &image.FenceBrokerRecord{NodeID: *rec.Leader})
			}
			s, err = s.Apply(10, rec)
			if tc.fenceIt {
				if got := electionError(err, tc.typ); !errors.Is(got, tc.want) {
					t.Fatalf("apply: %v, reported as %v", err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := s.Image.Partition("e", 0)
			if p.Leader != tc.leader || !slices.Equal(p.ISR, tc.isr) || p.LeaderEpoch != 3 || p.PartitionEpoch != 5 {
				t.Errorf("partition %+v, want leader %d ISR %v", p, tc.leader, tc.isr)
			}
		})
	}
}

// TestImbalancedLeaders: a broker whose preferred partitions are led by others beyond
// the percentage gets them back, when it is a live ISR member.
func TestImbalancedLeaders(t *testing.T) {
	p := func(leader int32, replicas, isr []int32) kernel.PartitionImage {
		return kernel.PartitionImage{Leader: leader, Replicas: replicas, ISR: isr}
	}
	im := electState(t, []int32{4},
		p(2, []int32{1, 2}, []int32{1, 2}), // prefers 1, led by 2: moves
		p(1, []int32{1, 2}, []int32{1, 2}), // prefers 1, led by 1
		p(3, []int32{1, 3}, []int32{3}),    // prefers 1, 1 not in the ISR: stays
		p(2, []int32{2, 3}, []int32{2, 3}), // prefers 2, led by 2
		p(3, []int32{4, 3}, []int32{3, 4}), // prefers fenced 4: stays
	)
	moved := func(recs []image.Record) []int32 {
		var out []int32
		for _, r := range recs {
			out = append(out, r.(*image.PartitionChangeRecord).Partition)
		}
		return out
	}
	// Broker 1: 2 of 3 preferred partitions led by others (67%).
	if got := moved(imbalancedLeaders(im, 10)); !slices.Equal(got, []int32{0}) {
		t.Errorf("10%%: moved %v", got)
	}
	if got := moved(imbalancedLeaders(im, 66)); !slices.Equal(got, []int32{0}) {
		t.Errorf("66%%: moved %v", got)
	}
	if got := moved(imbalancedLeaders(im, 67)); len(got) != 0 {
		t.Errorf("67%%: moved %v", got)
	}
}

// electReq builds an ElectLeaders request; nil topics elect every partition.
func electReq(version int16, typ int8, topics map[string][]int32) *kmsg.ElectLeadersRequest {
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType, req.TimeoutMillis = version, typ, 20000
	if topics != nil {
		req.Topics = []kmsg.ElectLeadersRequestTopic{}
	}
	for name, ps := range topics {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = name, ps
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// electCodes returns topic -> partition -> error code of a response.
func electCodes(resp *kmsg.ElectLeadersResponse) map[string]map[int32]int16 {
	out := map[string]map[int32]int16{}
	for _, t := range resp.Topics {
		if out[t.Topic] == nil {
			out[t.Topic] = map[int32]int16{}
		}
		for _, p := range t.Partitions {
			out[t.Topic][p.Partition] = p.ErrorCode
		}
	}
	return out
}

// rejoinISR acts as the leader of every partition of topic that has replica id outside
// its ISR, and adds it back (what the leader does once a follower caught up).
func rejoinISR(t *testing.T, nd *tnode, topic string, id int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		tp := nd.m.Image().Topic(topic)
		done := true
		for _, p := range tp.Partitions {
			if !slices.Contains(p.Replicas, id) || slices.Contains(p.ISR, id) || p.Leader < 0 {
				continue
			}
			done = false
			_, err := nd.m.AlterPartition(ctx, kernel.AlterPartitionRequest{Topic: topic, TopicID: tp.ID, Partition: p.Partition,
				Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: append(slices.Clone(p.ISR), id)})
			if err != nil && !kerrIs(err, kerr.InvalidUpdateVersion) && !kerrIs(err, kerr.FencedLeaderEpoch) {
				t.Fatalf("rejoin %s-%d: %v", topic, p.Partition, err)
			}
		}
		if done {
			return
		}
	}
}

// TestClusterElectLeaders: ElectLeaders through a broker that is not the controller, for
// each election type and outcome, around a broker that is fenced and comes back.
func TestClusterElectLeaders(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	var x, f *tnode // x is fenced; requests go through f
	for _, nd := range c.running() {
		switch {
		case nd == l:
		case x == nil:
			x = nd
		default:
			f = nd
		}
	}
	if rt := createTopicOn(t, l, "pref", -1, -1, map[int32][]int32{0: {x.id, f.id, l.id}, 1: {f.id, l.id, x.id}, 2: {l.id, x.id, f.id}}); rt.ErrorCode != 0 {
		t.Fatalf("create pref: %d", rt.ErrorCode)
	}
	if rt := createTopicOn(t, l, "un", -1, -1, map[int32][]int32{0: {x.id, f.id}}); rt.ErrorCode != 0 {
		t.Fatalf("create un: %d", rt.ErrorCode)
	}
	if rt := createTopicOn(t, l, "solo", -1, -1, map[int32][]int32{0: {x.id}}); rt.ErrorCode != 0 {
		t.Fatalf("create solo: %d", rt.ErrorCode)
	}
	c.waitAll(10*time.Second, "every broker has the topics", func(im *kernel.Image) bool { return im.Topic("solo") != nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	un := f.m.Image().Topic("un")
	if _, err := f.m.AlterPartition(ctx, kernel.AlterPartitionRequest{Topic: "un", TopicID: un.ID, Leader: x.id, ISR: []int32{x.id}}); err != nil {
		t.Fatalf("shrink un: %v", err)
	}

	for _, v := range []int16{0, 2} {
		resp := call[*kmsg.ElectLeadersResponse](t, f.fc, nil, electReq(v, electPreferred, map[string][]int32{"pref": {0, 1, 2}}))
		for p, code := range electCodes(resp)["pref"] {
			if code != kerr.ElectionNotNeeded.Code {
				t.Errorf("v%d: pref-%d: code %d", v, p, code)
			}
		}
	}

	x.m.life.pauseHeartbeats.Store(true)
	c.waitAll(20*time.Second, "x fenced, its leaderships moved", func(im *kernel.Image) bool {
		return im.Brokers[x.id].Fenced && im.Partition("pref", 0).Leader == f.id && im.Partition("un", 0).Leader == -1 &&
			!slices.Contains(im.Partition("pref", 1).ISR, x.id)
	})
	resp := call[*kmsg.ElectLeadersResponse](t, f.fc, nil, electReq(2, electPreferred, map[string][]int32{"pref": {0}}))
	if got := electCodes(resp)["pref"][0]; got != kerr.PreferredLeaderNotAvailable.Code {
		t.Errorf("preferred while fenced: code %d", got)
	}
	resp = call[*kmsg.ElectLeadersResponse](t, f.fc, nil, electReq(2, electUnclean,
		map[string][]int32{"un": {0}, "solo": {0}, "pref": {1, 7}, "nope": {0}}))
	codes := electCodes(resp)
	for _, c := range []struct {
		topic string
		p     int32
		want  *kerr.Error
	}{
		{"solo", 0, kerr.EligibleLeadersNotAvailable},
		{"pref", 1, kerr.ElectionNotNeeded},
		{"pref", 7, kerr.UnknownTopicOrPartition},
		{"nope", 0, kerr.UnknownTopicOrPartition},
	} {
		if got, ok := codes[c.topic][c.p]; !ok || got != c.want.Code {
			t.Errorf("unclean %s-%d: code %d (%v), want %s", c.topic, c.p, got, ok, c.want.Message)
		}
	}
	if got := codes["un"][0]; got != 0 {
		t.Fatalf("unclean un-0: code %d", got)
	}
	if p := f.m.Image().Partition("un", 0); p.Leader != f.id || !slices.Equal(p.ISR, []int32{f.id}) {
		t.Errorf("after unclean election: %+v", p)
	}

	x.m.life.pauseHeartbeats.Store(false)
	c.waitAll(20*time.Second, "x back, leading solo", func(im *kernel.Image) bool {
		return !im.Brokers[x.id].Fenced && im.Partition("solo", 0).Leader == x.id
	})
	rejoinISR(t, f, "pref", x.id)
	before := f.m.Image().Partition("pref", 0)
	// Every partition: only those that needed an election are answered.
	resp = call[*kmsg.ElectLeadersResponse](t, f.fc, nil, electReq(2, electPreferred, nil))
	codes = electCodes(resp)
	want := map[string]map[int32]int16{"pref": {0: 0}, "un": {0: kerr.PreferredLeaderNotAvailable.Code}}
	if len(codes) != 2 || len(codes["pref"]) != 1 || codes["pref"][0] != 0 || len(codes["un"]) != 1 || codes["un"][0] != want["un"][0] {
		t.Errorf("all partitions: %v, want %v", codes, want)
	}
	if p := f.m.Image().Partition("pref", 0); p.Leader != x.id || p.LeaderEpoch != before.LeaderEpoch+1 {
		t.Errorf("pref-0 after preferred election: %+v", p)
	}
	c.waitAll(10*time.Second, "every broker sees x lead pref-0", func(im *kernel.Image) bool { return im.Partition("pref", 0).Leader == x.id })

	// ALTER on the cluster is required.
	deny := denyAuthorizer{ops: map[kernel.Operation]bool{kernel.OpAlter: true}, cluster: true}
	resp = call[*kmsg.ElectLeadersResponse](t, f.fc, deny, electReq(2, electPreferred, map[string][]int32{"pref": {1}}))
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || electCodes(resp)["pref"][1] != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("denied: %+v", resp)
	}
}

// TestClusterAutoRebalance: with a short leader.imbalance.check.interval.seconds, a
// broker that comes back (and rejoins the ISR) gets the leadership of its preferred
// partitions back without an ElectLeaders request.
func TestClusterAutoRebalance(t *testing.T) {
	c := newClusterWith(t, 3, map[string]string{"leader.imbalance.check.interval.seconds": "1"})
	l := c.leader()
	x := c.follower()
	f := c.third(l, x)
	if rt := createTopicOn(t, l, "bal", -1, -1, map[int32][]int32{0: {x.id, f.id, l.id}, 1: {f.id, l.id, x.id}}); rt.ErrorCode != 0 {
		t.Fatalf("create: %d", rt.ErrorCode)
	}
	c.waitAll(10*time.Second, "every broker has the topic", func(im *kernel.Image) bool { return im.Topic("bal") != nil })
	x.m.life.pauseHeartbeats.Store(true)
	c.waitAll(20*time.Second, "x fenced, bal-0 led by f", func(im *kernel.Image) bool {
		return im.Brokers[x.id].Fenced && im.Partition("bal", 0).Leader == f.id
	})
	x.m.life.pauseHeartbeats.Store(false)
	c.waitAll(20*time.Second, "x unfenced", func(im *kernel.Image) bool { return !im.Brokers[x.id].Fenced })
	if p := l.m.Image().Partition("bal", 0); p.Leader != f.id {
		t.Fatalf("x leads before it is in the ISR: %+v", p)
	}
	rejoinISR(t, f, "bal", x.id)
	c.waitAll(20*time.Second, "the rebalance gives bal-0 back to x", func(im *kernel.Image) bool {
		return im.Partition("bal", 0).Leader == x.id
	})
	if p := l.m.Image().Partition("bal", 1); p.Leader != f.id {
		t.Errorf("bal-1 (preferred f) moved: %+v", p)
	}
}
