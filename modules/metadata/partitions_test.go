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
)

// partitionState is a state with brokers 1-4 (4 fenced) and topic "p" (id 20) whose
// partition 0 has replicas 1,2,3, leader 1, ISR 1,2.
func partitionState(t *testing.T) *state {
	t.Helper()
	s := emptyState()
	recs := []record{
		&registerBrokerRecord{NodeID: 1, Incarnation: id(1)},
		&registerBrokerRecord{NodeID: 2, Incarnation: id(2)},
		&registerBrokerRecord{NodeID: 3, Incarnation: id(3)},
		&registerBrokerRecord{NodeID: 4, Incarnation: id(4)},
		&fenceBrokerRecord{NodeID: 4},
		&createTopicRecord{Name: "p", ID: id(20), Partitions: []partitionAssignment{{Replicas: []int32{1, 2, 3}, Leader: 1, ISR: []int32{1, 2}}}},
	}
	for i, r := range recs {
		var err error
		if s, err = s.apply(uint64(i+1), r); err != nil {
			t.Fatalf("setup %d: %v", i, err)
		}
	}
	return s
}

// alterRec is the entry AlterPartition writes.
func alterRec(leader, leaderEpoch, partitionEpoch int32, isr ...int32) *partitionChangeRecord {
	return &partitionChangeRecord{Topic: "p", ID: id(20), PartitionEpoch: partitionEpoch, ISR: isr,
		partitionChangeV2: partitionChangeV2{ExpectLeader: &leader, ExpectLeaderEpoch: &leaderEpoch, Validate: true}}
}

// TestApplyAlterPartition: every check of a validated PartitionChange, through the
// record codec (version 2), on the state alone.
func TestApplyAlterPartition(t *testing.T) {
	base := partitionState(t)
	for _, tc := range []struct {
		name    string
		rec     *partitionChangeRecord
		wantErr error
		wantISR []int32
		epoch   int32 // partition epoch after
	}{
		{"expand", alterRec(1, 0, 0, 1, 2, 3), nil, []int32{1, 2, 3}, 1},
		{"shrink", alterRec(1, 0, 0, 1), nil, []int32{1}, 1},
		{"same set", alterRec(1, 0, 0, 2, 1), nil, []int32{1, 2}, 0},
		{"not the leader", alterRec(2, 0, 0, 1, 2), errNotLeader, nil, 0},
		{"old leader epoch", alterRec(1, 3, 0, 1, 2), errFencedLeaderEpoch, nil, 0},
		{"stale partition epoch", alterRec(1, 0, 4, 1), errStale, nil, 0},
		{"leader left out", alterRec(1, 0, 0, 2), errInvalidEntry, nil, 0},
		{"duplicate", alterRec(1, 0, 0, 1, 1), errInvalidEntry, nil, 0},
		{"duplicate same size", alterRec(1, 0, 0, 1, 1, 2), errInvalidEntry, nil, 0},
		{"not a replica", alterRec(1, 0, 0, 1, 4), errInvalidEntry, nil, 0},
		{"unknown topic", &partitionChangeRecord{Topic: "p", ID: id(21), ISR: []int32{1}, partitionChangeV2: partitionChangeV2{Validate: true}}, errUnknownTopic, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := encodeRecord(tc.rec)
			if err != nil || b[1] != 2 {
				t.Fatalf("encode: version %d, %v", b[1], err)
			}
			rec, err := decodeRecord(b)
			if err != nil {
				t.Fatal(err)
			}
			s, err := base.apply(100, rec)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			p := s.img.Partition("p", 0)
			if tc.wantErr != nil {
				if !slices.Equal(p.ISR, []int32{1, 2}) || p.PartitionEpoch != 0 {
					t.Errorf("rejected entry changed the partition: %+v", p)
				}
				return
			}
			if !slices.Equal(p.ISR, tc.wantISR) || p.PartitionEpoch != tc.epoch || p.Leader != 1 || p.LeaderEpoch != 0 {
				t.Errorf("partition %+v, want ISR %v epoch %d", p, tc.wantISR, tc.epoch)
			}
		})
	}
	// A fenced broker cannot join the ISR.
	s, err := base.apply(7, &partitionChangeRecord{Topic: "p", ID: id(20), PartitionEpoch: 0, Replicas: []int32{1, 2, 3, 4},
		partitionChangeV2: partitionChangeV2{Validate: true}})
	if err != nil {
		t.Fatalf("add replica 4: %v", err)
	}
	if _, err := s.apply(8, alterRec(1, 0, 1, 1, 2, 4)); !errors.Is(err, errIneligibleReplica) {
		t.Errorf("fenced broker joins the ISR: %v", err)
	}
	// A member that stays need not be live: broker 2 fenced, the leader keeps it.
	s, _ = s.apply(9, &fenceBrokerRecord{NodeID: 2})
	if _, err := s.apply(10, alterRec(1, 0, 1, 1, 2)); err != nil {
		t.Errorf("keeping a fenced member: %v", err)
	}
	// A validated change may not name an unregistered replica or a fenced new leader.
	if _, err := base.apply(11, &partitionChangeRecord{Topic: "p", ID: id(20), PartitionEpoch: -1, Replicas: []int32{1, 2, 3, 9},
		partitionChangeV2: partitionChangeV2{Validate: true}}); !errors.Is(err, errUnknownBroker) {
		t.Errorf("unregistered replica: %v", err)
	}
	if _, err := s.apply(12, &partitionChangeRecord{Topic: "p", ID: id(20), PartitionEpoch: -1, Leader: i32(2),
		partitionChangeV2: partitionChangeV2{Validate: true}}); !errors.Is(err, errIneligibleReplica) {
		t.Errorf("fenced new leader: %v", err)
	}
}

// TestPartitionChangeVersions: an entry with no version 2 field stays version 1, and a
// version 1 entry's payload never carries version 2 meaning.
func TestPartitionChangeVersions(t *testing.T) {
	v1 := &partitionChangeRecord{Topic: "p", ID: id(20), PartitionEpoch: 0, Leader: i32(2)}
	b, err := encodeRecord(v1)
	if err != nil || b[1] != 1 {
		t.Fatalf("plain change: version %d, %v", b[1], err)
	}
	// A version 1 header with a version 2 field: the field is dropped on decoding.
	forged := append([]byte{byte(recPartitionChange), 1}, `{"topic":"p","id":"`+id(20).String()+`","partition":0,"partition_epoch":0,"isr":[2],"expect_leader":7,"validate":true}`...)
	rec, err := decodeRecord(forged)
	if err != nil {
		t.Fatal(err)
	}
	if pc := rec.(*partitionChangeRecord); pc.ExpectLeader != nil || pc.Validate {
		t.Errorf("version 1 entry kept version 2 fields: %+v", pc)
	}
	if _, err := decodeRecord(append([]byte{byte(recPartitionChange), 3}, '{', '}')); !errors.Is(err, ErrUnknownRecord) {
		t.Errorf("version 3: %v", err)
	}
}

// kerrIs reports whether err wraps the Kafka error want.
func kerrIs(err error, want *kerr.Error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && ke == want
}

// TestClusterAlterPartition: AlterPartition through a broker that is not the
// controller, its result, and each rejection with its Kafka error.
func TestClusterAlterPartition(t *testing.T) {
	c := newCluster(t, 3)
	f := c.follower()
	var others []int32
	for _, nd := range c.running() {
		if nd != f {
			others = append(others, nd.id)
		}
	}
	slices.Sort(others)
	a, b := others[0], others[1]
	if rt := createTopicOn(t, f, "isr", -1, -1, map[int32][]int32{0: {f.id, a, b}}); rt.ErrorCode != 0 {
		t.Fatalf("create: %d", rt.ErrorCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp := f.m.Image().Topic("isr")
	req := kernel.AlterPartitionRequest{Topic: "isr", TopicID: tp.ID, Partition: 0, Leader: f.id, LeaderEpoch: 0, PartitionEpoch: 0, ISR: []int32{f.id, a}}
	got, err := f.m.AlterPartition(ctx, req)
	if err != nil {
		t.Fatalf("shrink: %v", err)
	}
	if got.PartitionEpoch != 1 || !slices.Equal(got.ISR, []int32{f.id, a}) || got.Leader != f.id || got.LeaderEpoch != 0 {
		t.Fatalf("after shrink: %+v", got)
	}
	if p := f.m.Image().Partition("isr", 0); p.PartitionEpoch != 1 {
		t.Errorf("the caller's image does not hold the change: %+v", p)
	}
	c.waitAll(10*time.Second, "every broker has the new ISR", func(im *kernel.Image) bool {
		p := im.Partition("isr", 0)
		return p != nil && p.PartitionEpoch == 1 && slices.Equal(p.ISR, []int32{f.id, a})
	})
	// The same ISR again: accepted, no new epoch.
	req.PartitionEpoch = 1
	if got, err := f.m.AlterPartition(ctx, req); err != nil || got.PartitionEpoch != 1 {
		t.Errorf("no-op: %+v %v", got, err)
	}

	for _, tc := range []struct {
		name string
		edit func(r *kernel.AlterPartitionRequest)
		want *kerr.Error
	}{
		{"stale partition epoch", func(r *kernel.AlterPartitionRequest) { r.PartitionEpoch = 0 }, kerr.InvalidUpdateVersion},
		{"not the leader", func(r *kernel.AlterPartitionRequest) { r.Leader = a }, kerr.NotLeaderForPartition},
		{"old leader epoch", func(r *kernel.AlterPartitionRequest) { r.LeaderEpoch = 5 }, kerr.FencedLeaderEpoch},
		{"leader left out", func(r *kernel.AlterPartitionRequest) { r.ISR = []int32{a, b} }, kerr.InvalidRequest},
		{"duplicates", func(r *kernel.AlterPartitionRequest) { r.ISR = []int32{f.id, a, a} }, kerr.InvalidRequest},
		{"not a replica", func(r *kernel.AlterPartitionRequest) { r.ISR = []int32{f.id, 42} }, kerr.InvalidRequest},
		{"empty", func(r *kernel.AlterPartitionRequest) { r.ISR = nil }, kerr.InvalidRequest},
		{"unknown topic", func(r *kernel.AlterPartitionRequest) { r.Topic, r.TopicID = "nope", [16]byte{} }, kerr.UnknownTopicOrPartition},
		{"unknown topic id", func(r *kernel.AlterPartitionRequest) { r.TopicID = [16]byte{1} }, kerr.UnknownTopicID},
		{"unknown partition", func(r *kernel.AlterPartitionRequest) { r.Partition = 3 }, kerr.UnknownTopicOrPartition},
	} {
		r := req
		r.ISR = []int32{f.id, a, b}
		tc.edit(&r)
		if _, err := f.m.AlterPartition(ctx, r); !kerrIs(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if p := f.m.Image().Partition("isr", 0); p.PartitionEpoch != 1 || !slices.Equal(p.ISR, []int32{f.id, a}) {
		t.Fatalf("a refused change changed the partition: %+v", p)
	}

	// A fenced broker cannot rejoin the ISR.
	nb := c.nodes[b]
	nb.m.pauseHeartbeats.Store(true)
	c.waitAll(20*time.Second, "broker b is fenced", func(im *kernel.Image) bool { return im.Brokers[b].Fenced })
	p := f.m.Image().Partition("isr", 0)
	r := req
	r.PartitionEpoch, r.ISR = p.PartitionEpoch, []int32{f.id, a, b}
	if _, err := f.m.AlterPartition(ctx, r); !kerrIs(err, kerr.IneligibleReplica) {
		t.Errorf("fenced broker joins: %v", err)
	}
	nb.m.pauseHeartbeats.Store(false)
	c.waitAll(20*time.Second, "broker b is unfenced", func(im *kernel.Image) bool { return !im.Brokers[b].Fenced })
	p = f.m.Image().Partition("isr", 0)
	r.PartitionEpoch = p.PartitionEpoch
	if got, err := f.m.AlterPartition(ctx, r); err != nil || !slices.Equal(got.ISR, []int32{f.id, a, b}) {
		t.Errorf("expand after unfencing: %+v %v", got, err)
	}
	// A cancelled ctx is reported as such.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, err := f.m.AlterPartition(cctx, r); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// electState builds an image with brokers 1-4 (those in fenced fenced) and topic "e"
// with the given partitions.
func electState(t *testing.T, fenced []int32, parts ...kernel.PartitionImage) *kernel.Image {
	t.Helper()
	im := emptyState().img
	for id := int32(1); id <= 4; id++ {
		im.Brokers[id] = &kernel.BrokerImage{ID: id, Fenced: slices.Contains(fenced, id)}
	}
	for i := range parts {
		parts[i].Partition = int32(i)
	}
	tp := &kernel.TopicImage{Name: "e", ID: id(30), Partitions: parts}
	im.Topics["e"], im.TopicsByID[tp.ID] = tp, tp
	return im
}

// TestElectLeaders: the controller's liveness repairs, one partition per case.
func TestElectLeaders(t *testing.T) {
	part := func(leader int32, replicas, isr []int32) kernel.PartitionImage {
		return kernel.PartitionImage{Leader: leader, LeaderEpoch: 3, PartitionEpoch: 5, Replicas: replicas, ISR: isr}
	}
	never := func(*kernel.TopicImage) bool { return false }
	always := func(*kernel.TopicImage) bool { return true }
	for _, tc := range []struct {
		name       string
		fenced     []int32
		p          kernel.PartitionImage
		unclean    func(*kernel.TopicImage) bool
		wantChange bool
		leader     int32
		isr        []int32
	}{
		{"all live", nil, part(1, []int32{1, 2, 3}, []int32{1, 2, 3}), never, false, 1, []int32{1, 2, 3}},
		{"follower fenced", []int32{2}, part(1, []int32{1, 2, 3}, []int32{1, 2, 3}), never, true, 1, []int32{1, 3}},
		{"leader fenced", []int32{1}, part(1, []int32{1, 2, 3}, []int32{1, 3, 2}), never, true, 2, []int32{3, 2}},
		{"leader and next fenced", []int32{1, 2}, part(1, []int32{1, 2, 3}, []int32{1, 2, 3}), never, true, 3, []int32{3}},
		{"last member fenced", []int32{1}, part(1, []int32{1, 2, 3}, []int32{1}), never, true, -1, []int32{1}},
		{"last members fenced at once", []int32{1, 2}, part(1, []int32{1, 2, 3}, []int32{1, 2}), never, true, -1, []int32{1, 2}},
		{"offline stays offline", []int32{1}, part(-1, []int32{1, 2, 3}, []int32{1}), never, false, -1, []int32{1}},
		{"member back", nil, part(-1, []int32{3, 2, 1}, []int32{1, 2}), never, true, 2, []int32{1, 2}},
		{"member back, other still fenced", []int32{2}, part(-1, []int32{3, 2, 1}, []int32{1, 2}), never, true, 1, []int32{1}},
		{"unclean", []int32{1}, part(1, []int32{1, 2, 3}, []int32{1}), always, true, 2, []int32{2}},
		{"unclean, nobody live", []int32{1, 2, 3}, part(1, []int32{1, 2, 3}, []int32{1}), always, true, -1, []int32{1}},
		{"unregistered member", nil, part(1, []int32{1, 9}, []int32{1, 9}), never, true, 1, []int32{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := electState(t, tc.fenced, tc.p)
			recs := electLeaders(im, tc.unclean)
			if !tc.wantChange {
				if len(recs) != 0 {
					t.Fatalf("changes %+v", recs[0])
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("%d changes", len(recs))
			}
			s, err := (&state{img: im, regs: map[int32]brokerReg{}}).apply(10, recs[0])
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := encodeRecord(recs[0]); b[1] != 1 {
				t.Errorf("controller election written at version %d", b[1])
			}
			p := s.img.Partition("e", 0)
			if p.Leader != tc.leader || !slices.Equal(p.ISR, tc.isr) || p.PartitionEpoch != 6 {
				t.Errorf("leader %d ISR %v epoch %d, want leader %d ISR %v", p.Leader, p.ISR, p.PartitionEpoch, tc.leader, tc.isr)
			}
			if wantEpoch := tc.p.LeaderEpoch + 1; tc.leader != tc.p.Leader && p.LeaderEpoch != wantEpoch {
				t.Errorf("leader epoch %d, want %d", p.LeaderEpoch, wantEpoch)
			}
			if again := electLeaders(s.img, tc.unclean); len(again) != 0 {
				t.Errorf("not settled: %+v", again[0])
			}
		})
	}
}

// TestClusterUncleanElection: a partition whose only ISR member is fenced stays offline
// unless unclean.leader.election.enable allows a replica outside the ISR to lead: as a
// topic config, or as the dynamic cluster default.
func TestClusterUncleanElection(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	var x, y *tnode
	for _, nd := range c.running() {
		switch {
		case nd == l:
		case x == nil:
			x = nd
		default:
			y = nd
		}
	}
	for _, name := range []string{"clean", "unclean"} {
		if rt := createTopicOn(t, l, name, -1, -1, map[int32][]int32{0: {x.id, y.id}}); rt.ErrorCode != 0 {
			t.Fatalf("create %s: %d", name, rt.ErrorCode)
		}
	}
	setConfig := func(typ kmsg.ConfigResourceType, name, key, value string) {
		t.Helper()
		res := incremental(t, l.fc, typ, name, false, op(key, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)))
		if res.ErrorCode != 0 {
			t.Fatalf("set %s on %s: %d %v", key, name, res.ErrorCode, res.ErrorMessage)
		}
	}
	c.waitAll(10*time.Second, "every broker has the topics", func(im *kernel.Image) bool { return im.Topic("unclean") != nil })
	setConfig(kmsg.ConfigResourceTypeTopic, "unclean", "unclean.leader.election.enable", "true")
	// x, the leader, shrinks both ISRs to itself (y fell behind).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{"clean", "unclean"} {
		tp := x.m.Image().Topic(name)
		req := kernel.AlterPartitionRequest{Topic: name, TopicID: tp.ID, Leader: x.id, ISR: []int32{x.id}}
		if _, err := x.m.AlterPartition(ctx, req); err != nil {
			t.Fatalf("shrink %s: %v", name, err)
		}
	}
	x.m.pauseHeartbeats.Store(true)
	c.waitAll(20*time.Second, "x fenced; unclean led by y, clean offline", func(im *kernel.Image) bool {
		u, cl := im.Partition("unclean", 0), im.Partition("clean", 0)
		return im.Brokers[x.id].Fenced && u.Leader == y.id && cl.Leader == -1
	})
	im := l.m.Image()
	if u := im.Partition("unclean", 0); !slices.Equal(u.ISR, []int32{y.id}) || u.LeaderEpoch != 1 {
		t.Errorf("unclean: %+v", u)
	}
	if cl := im.Partition("clean", 0); !slices.Equal(cl.ISR, []int32{x.id}) {
		t.Errorf("clean: %+v", cl)
	}
	// The cluster-wide dynamic default lets the clean topic elect uncleanly too.
	setConfig(kmsg.ConfigResourceTypeBroker, "", "unclean.leader.election.enable", "true")
	c.waitAll(20*time.Second, "clean led by y", func(im *kernel.Image) bool {
		p := im.Partition("clean", 0)
		return p.Leader == y.id && slices.Equal(p.ISR, []int32{y.id})
	})
	// x comes back: it is in no ISR, so it leads nothing.
	x.m.pauseHeartbeats.Store(false)
	c.waitAll(20*time.Second, "x unfenced", func(im *kernel.Image) bool { return !im.Brokers[x.id].Fenced })
	c.waitAll(5*time.Second, "y still leads", func(im *kernel.Image) bool {
		return im.Partition("clean", 0).Leader == y.id && im.Partition("unclean", 0).Leader == y.id
	})
}

// TestTopicMetadataReplicas: Metadata reports the image's replicas and ISR, and (v5+)
// the replicas on fenced or unregistered brokers as offline.
func TestTopicMetadataReplicas(t *testing.T) {
	im := electState(t, []int32{2}, kernel.PartitionImage{Leader: 1, Replicas: []int32{1, 2, 9, 3}, ISR: []int32{3, 1},
		AddingReplicas: []int32{3}, RemovingReplicas: []int32{2}})
	im.Brokers[1].Endpoints = []kernel.ListenerInfo{{Name: "PLAINTEXT", Host: "h", Port: 1}}
	for _, v := range []int16{4, 5, 12} {
		mt := topicMetadata(im, im.Topics["e"], "", v)
		p := mt.Partitions[0]
		var offline []int32
		if v >= 5 {
			offline = []int32{2, 9}
		}
		if p.ErrorCode != 0 || p.Leader != 1 || !slices.Equal(p.Replicas, []int32{1, 2, 9, 3}) || !slices.Equal(p.ISR, []int32{3, 1}) ||
			!slices.Equal(p.OfflineReplicas, offline) {
			t.Errorf("v%d: %+v", v, p)
		}
	}
}

// TestClusterNewIncarnationLeavesISRs: a new incarnation of a broker that was never
// fenced (it crashed and came back before the controller saw its session expire) leaves
// the ISRs and its leaderships before it registers; the same incarnation registering
// again (after STALE_BROKER_EPOCH) changes nothing.
func TestClusterNewIncarnationLeavesISRs(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	x := c.follower()
	var a int32
	for _, nd := range c.running() {
		if nd != l && nd != x {
			a = nd.id
		}
	}
	if rt := createTopicOn(t, l, "inc", -1, -1, map[int32][]int32{0: {x.id, a, l.id}}); rt.ErrorCode != 0 {
		t.Fatalf("create: %d", rt.ErrorCode)
	}
	x.m.pauseHeartbeats.Store(true) // x's own re-registrations stay out of the way
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := x.m.registrationRequest()
	if resp := l.m.ctlRegister(ctx, req); resp.ErrorCode != 0 {
		t.Fatalf("same incarnation: code %d", resp.ErrorCode)
	}
	if p := l.m.Image().Partition("inc", 0); p.Leader != x.id || !slices.Equal(p.ISR, []int32{x.id, a, l.id}) {
		t.Fatalf("the same incarnation changed the partition: %+v", *p)
	}
	// A new controller has heard from nobody: the new incarnation is accepted.
	l.m.ctl.reset()
	fresh, err := l.m.newUUID()
	if err != nil {
		t.Fatal(err)
	}
	req.IncarnationID = fresh
	if resp := l.m.ctlRegister(ctx, req); resp.ErrorCode != 0 {
		t.Fatalf("new incarnation: code %d", resp.ErrorCode)
	}
	im := l.m.Image()
	if p := im.Partition("inc", 0); p.Leader != a || !slices.Equal(p.ISR, []int32{a, l.id}) {
		t.Errorf("after the new incarnation registered: %+v", *p)
	}
	if b := im.Brokers[x.id]; b.Fenced || l.m.hub.state().regs[x.id].Incarnation != fresh {
		t.Errorf("registration: %+v", b)
	}
	x.m.pauseHeartbeats.Store(false)
}
