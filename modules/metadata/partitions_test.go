package metadata

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

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
	nb.m.life.pauseHeartbeats.Store(true)
	c.waitAll(20*time.Second, "broker b is fenced", func(im *kernel.Image) bool { return im.Brokers[b].Fenced })
	p := f.m.Image().Partition("isr", 0)
	r := req
	r.PartitionEpoch, r.ISR = p.PartitionEpoch, []int32{f.id, a, b}
	if _, err := f.m.AlterPartition(ctx, r); !kerrIs(err, kerr.IneligibleReplica) {
		t.Errorf("fenced broker joins: %v", err)
	}
	nb.m.life.pauseHeartbeats.Store(false)
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

// TestClusterAlterPartitionCoalesced: concurrent ISR changes from one broker go to the
// controller together (changebatch.go): each caller gets its own partition's outcome,
// and the metadata log grows by far fewer entries than there are changes.
func TestClusterAlterPartitionCoalesced(t *testing.T) {
	c := newCluster(t, 3)
	f := c.follower()
	var others []int32
	for _, nd := range c.running() {
		if nd != f {
			others = append(others, nd.id)
		}
	}
	slices.Sort(others)
	const n = 400
	assign := map[int32][]int32{}
	for p := range int32(n) {
		assign[p] = []int32{f.id, others[0], others[1]}
	}
	if rt := createTopicOn(t, f, "many", -1, -1, assign); rt.ErrorCode != 0 {
		t.Fatalf("create: %d", rt.ErrorCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp := f.m.Image().Topic("many")
	leader := c.leader().m.node.raft.Load()
	before := leader.LastIndex()
	errs := make([]error, n)
	got := make([]kernel.PartitionImage, n)
	var wg sync.WaitGroup
	for p := range int32(n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kernel.AlterPartitionRequest{Topic: "many", TopicID: tp.ID, Partition: p, Leader: f.id, ISR: []int32{f.id, others[0]}}
			if p == 7 {
				req.PartitionEpoch = 3 // stale: refused alone
			}
			got[p], errs[p] = f.m.AlterPartition(ctx, req)
		}()
	}
	wg.Wait()
	for p := range n {
		if p == 7 {
			if !kerrIs(errs[p], kerr.InvalidUpdateVersion) {
				t.Errorf("partition 7 with a stale epoch: %v, want INVALID_UPDATE_VERSION", errs[p])
			}
			continue
		}
		if errs[p] != nil || got[p].PartitionEpoch != 1 || !slices.Equal(got[p].ISR, []int32{f.id, others[0]}) {
			t.Errorf("partition %d: %+v %v", p, got[p], errs[p])
		}
	}
	if grown := leader.LastIndex() - before; grown > n/10 {
		t.Errorf("%d changes took %d log entries, want them coalesced (at most %d)", n, grown, n/10)
	}
}

// electState builds an image with brokers 1-4 (those in fenced fenced) and topic "e"
// with the given partitions.
func electState(t *testing.T, fenced []int32, parts ...kernel.PartitionImage) *kernel.Image {
	t.Helper()
	im := image.EmptyState().Image
	for id := int32(1); id <= 4; id++ {
		im.Brokers[id] = &kernel.BrokerImage{ID: id, Fenced: slices.Contains(fenced, id)}
	}
	for i := range parts {
		parts[i].Partition = int32(i)
	}
	tp := &kernel.TopicImage{Name: "e", ID: id(30), Partitions: parts}
	im.PutTopic(tp)
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
			s, err := (&image.State{Image: im, Regs: map[int32]image.BrokerReg{}}).Apply(10, recs[0])
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := image.EncodeRecord(recs[0]); b[1] != 1 {
				t.Errorf("controller election written at version %d", b[1])
			}
			p := s.Image.Partition("e", 0)
			if p.Leader != tc.leader || !slices.Equal(p.ISR, tc.isr) || p.PartitionEpoch != 6 {
				t.Errorf("leader %d ISR %v epoch %d, want leader %d ISR %v", p.Leader, p.ISR, p.PartitionEpoch, tc.leader, tc.isr)
			}
			if wantEpoch := tc.p.LeaderEpoch + 1; tc.leader != tc.p.Leader && p.LeaderEpoch != wantEpoch {
				t.Errorf("leader epoch %d, want %d", p.LeaderEpoch, wantEpoch)
			}
			if again := electLeaders(s.Image, tc.unclean); len(again) != 0 {
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
	x.m.life.pauseHeartbeats.Store(true)
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
	x.m.life.pauseHeartbeats.Store(false)
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
		mt := topicMetadata(im, im.Topic("e"), "", v)
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
	a := c.third(l, x).id
	if rt := createTopicOn(t, l, "inc", -1, -1, map[int32][]int32{0: {x.id, a, l.id}}); rt.ErrorCode != 0 {
		t.Fatalf("create: %d", rt.ErrorCode)
	}
	x.m.life.pauseHeartbeats.Store(true) // x's own re-registrations stay out of the way
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := x.m.life.registrationRequest()
	if resp := l.m.ctl.ctlRegister(ctx, req); resp.ErrorCode != 0 {
		t.Fatalf("same incarnation: code %d", resp.ErrorCode)
	}
	if p := l.m.Image().Partition("inc", 0); p.Leader != x.id || !slices.Equal(p.ISR, []int32{x.id, a, l.id}) {
		t.Fatalf("the same incarnation changed the partition: %+v", *p)
	}
	// A new controller has heard from nobody: the new incarnation is accepted.
	l.m.ctl.reset()
	fresh, err := l.m.node.newUUID()
	if err != nil {
		t.Fatal(err)
	}
	req.IncarnationID = fresh
	if resp := l.m.ctl.ctlRegister(ctx, req); resp.ErrorCode != 0 {
		t.Fatalf("new incarnation: code %d", resp.ErrorCode)
	}
	im := l.m.Image()
	if p := im.Partition("inc", 0); p.Leader != a || !slices.Equal(p.ISR, []int32{a, l.id}) {
		t.Errorf("after the new incarnation registered: %+v", *p)
	}
	if b := im.Brokers[x.id]; b.Fenced || l.m.node.hub.state().Regs[x.id].Incarnation != fresh {
		t.Errorf("registration: %+v", b)
	}
	x.m.life.pauseHeartbeats.Store(false)
}
