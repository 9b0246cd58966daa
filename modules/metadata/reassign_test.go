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

// applyAll applies recs to im (as a state) and returns the resulting image.
func applyAll(t *testing.T, im *kernel.Image, recs ...image.Record) *kernel.Image {
	t.Helper()
	s := &image.State{Image: im, Regs: map[int32]image.BrokerReg{}}
	for i, r := range recs {
		b, err := image.EncodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := image.DecodeRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		if s, err = s.Apply(im.Version+uint64(i)+1, dec); err != nil {
			t.Fatalf("apply %+v: %v", r, err)
		}
	}
	return s.Image
}

// TestPlanReassignment: starting, re-targeting and cancelling, one partition per case,
// and what the controller's completion makes of each.
func TestPlanReassignment(t *testing.T) {
	part := func(leader int32, replicas, isr, adding, removing []int32) kernel.PartitionImage {
		return kernel.PartitionImage{Leader: leader, LeaderEpoch: 1, PartitionEpoch: 2, Replicas: replicas, ISR: isr,
			AddingReplicas: adding, RemovingReplicas: removing}
	}
	never := func(*kernel.TopicImage) bool { return false }
	always := func(*kernel.TopicImage) bool { return true }
	type want struct {
		leader                          int32
		replicas, isr, adding, removing []int32
	}
	for _, tc := range []struct {
		name    string
		fenced  []int32
		p       kernel.PartitionImage
		target  []int32
		unclean func(*kernel.TopicImage) bool
		err     *kerr.Error
		noop    bool
		want    want
	}{
		{name: "move one", p: part(1, []int32{1, 2}, []int32{1, 2}, nil, nil), target: []int32{2, 3},
			want: want{1, []int32{2, 3, 1}, []int32{1, 2}, []int32{3}, []int32{1}}},
		{name: "grow", p: part(1, []int32{1, 2}, []int32{1, 2}, nil, nil), target: []int32{1, 2, 3},
			want: want{1, []int32{1, 2, 3}, []int32{1, 2}, []int32{3}, nil}},
		{name: "shrink", p: part(1, []int32{1, 2, 3}, []int32{1, 2, 3}, nil, nil), target: []int32{1, 2},
			want: want{1, []int32{1, 2, 3}, []int32{1, 2, 3}, nil, []int32{3}}},
		{name: "reorder", p: part(1, []int32{1, 2, 3}, []int32{1, 2, 3}, nil, nil), target: []int32{3, 2, 1},
			want: want{1, []int32{3, 2, 1}, []int32{1, 2, 3}, nil, nil}},
		{name: "same", p: part(1, []int32{1, 2}, []int32{1, 2}, nil, nil), target: []int32{1, 2}, noop: true},
		{name: "re-target", p: part(1, []int32{2, 3, 1}, []int32{1, 2}, []int32{3}, []int32{1}), target: []int32{2, 4},
			want: want{1, []int32{2, 4, 3, 1}, []int32{1, 2}, []int32{4}, []int32{3, 1}}},
		{name: "empty", p: part(1, []int32{1}, []int32{1}, nil, nil), target: []int32{}, err: kerr.InvalidReplicaAssignment},
		{name: "duplicates", p: part(1, []int32{1}, []int32{1}, nil, nil), target: []int32{2, 2}, err: kerr.InvalidReplicaAssignment},
		{name: "unknown broker", p: part(1, []int32{1}, []int32{1}, nil, nil), target: []int32{1, 9}, err: kerr.InvalidReplicaAssignment},
		{name: "cancel nothing", p: part(1, []int32{1}, []int32{1}, nil, nil), err: kerr.NoReassignmentInProgress},
		{name: "cancel", p: part(1, []int32{2, 3, 1}, []int32{1, 2}, []int32{3}, []int32{1}),
			want: want{1, []int32{2, 1}, []int32{1, 2}, nil, nil}},
		{name: "cancel, leader was being added", p: part(3, []int32{3, 1, 2}, []int32{3, 2}, []int32{3}, []int32{1}),
			want: want{2, []int32{1, 2}, []int32{2}, nil, nil}},
		{name: "cancel, unclean refused", p: part(3, []int32{3, 1}, []int32{3}, []int32{3}, []int32{1}), unclean: never,
			err: kerr.InvalidReplicaAssignment},
		{name: "cancel, unclean allowed", p: part(3, []int32{3, 1}, []int32{3}, []int32{3}, []int32{1}), unclean: always,
			want: want{1, []int32{1}, []int32{1}, nil, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := electState(t, tc.fenced, tc.p)
			tp := im.Topic("e")
			if tc.unclean == nil {
				tc.unclean = never
			}
			rec, err := planReassignment(im, tp, &tp.Partitions[0], tc.target, tc.unclean)
			switch {
			case tc.err != nil:
				if !errors.Is(err, tc.err) || rec != nil {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			case tc.noop:
				if rec != nil {
					t.Fatalf("change %+v", rec)
				}
				return
			}
			p := applyAll(t, im, rec).Partition("e", 0)
			w := tc.want
			if p.Leader != w.leader || !slices.Equal(p.Replicas, w.replicas) || !slices.Equal(p.ISR, w.isr) ||
				!slices.Equal(p.AddingReplicas, w.adding) || !slices.Equal(p.RemovingReplicas, w.removing) || p.PartitionEpoch != 3 {
				t.Errorf("partition %+v, want %+v", *p, w)
			}
		})
	}
}

// TestCompleteReassignments: a reassignment completes once the ISR (without the
// removing replicas) holds every target replica, and not before.
func TestCompleteReassignments(t *testing.T) {
	part := func(leader int32, replicas, isr, adding, removing []int32) kernel.PartitionImage {
		return kernel.PartitionImage{Leader: leader, PartitionEpoch: 2, Replicas: replicas, ISR: isr, AddingReplicas: adding, RemovingReplicas: removing}
	}
	for _, tc := range []struct {
		name     string
		fenced   []int32
		p        kernel.PartitionImage
		done     bool
		leader   int32
		replicas []int32
		isr      []int32
	}{
		{"adding not caught up", nil, part(1, []int32{2, 3, 1}, []int32{1, 2}, []int32{3}, []int32{1}), false, 0, nil, nil},
		{"adding caught up, leader removed", nil, part(1, []int32{2, 3, 1}, []int32{1, 2, 3}, []int32{3}, []int32{1}), true, 2, []int32{2, 3}, []int32{2, 3}},
		{"leader stays", nil, part(3, []int32{2, 3, 1}, []int32{1, 3, 2}, []int32{2}, []int32{1}), true, 3, []int32{2, 3}, []int32{3, 2}},
		{"new leader in target order, live", []int32{2}, part(1, []int32{2, 3, 1}, []int32{1, 2, 3}, []int32{3}, []int32{1}), true, 3, []int32{2, 3}, []int32{2, 3}},
		{"pure removal", nil, part(1, []int32{1, 2, 3}, []int32{1, 2, 3}, nil, []int32{3}), true, 1, []int32{1, 2}, []int32{1, 2}},
		{"a kept replica out of the ISR", nil, part(1, []int32{1, 2, 3}, []int32{1, 3}, nil, []int32{3}), false, 0, nil, nil},
		{"grow", nil, part(1, []int32{1, 2, 3}, []int32{1, 2, 3}, []int32{3}, nil), true, 1, []int32{1, 2, 3}, []int32{1, 2, 3}},
		{"no reassignment", nil, part(1, []int32{1, 2}, []int32{1}, nil, nil), false, 0, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := electState(t, tc.fenced, tc.p)
			recs := completeReassignments(im)
			if !tc.done {
				if len(recs) != 0 {
					t.Fatalf("completed: %+v", recs[0])
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("%d changes", len(recs))
			}
			p := applyAll(t, im, recs...).Partition("e", 0)
			if p.Leader != tc.leader || !slices.Equal(p.Replicas, tc.replicas) || !slices.Equal(p.ISR, tc.isr) || reassigning(p) {
				t.Errorf("partition %+v, want leader %d replicas %v ISR %v", *p, tc.leader, tc.replicas, tc.isr)
			}
		})
	}
}

// reassignReq builds an AlterPartitionReassignments request; a nil list cancels.
func reassignReq(topic string, parts map[int32][]int32) *kmsg.AlterPartitionAssignmentsRequest {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = 20000
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = topic
	for _, p := range slices.Sorted(mapsKeys(parts)) {
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = p, parts[p]
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func mapsKeys(m map[int32][]int32) func(func(int32) bool) {
	return func(yield func(int32) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func reassignCodes(resp *kmsg.AlterPartitionAssignmentsResponse) map[int32]int16 {
	out := map[int32]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.ErrorCode
		}
	}
	return out
}

func listReassignments(t *testing.T, nd *tnode, topics ...string) map[string]map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	for _, name := range topics {
		rt := kmsg.NewListPartitionReassignmentsRequestTopic()
		rt.Topic, rt.Partitions = name, []int32{0, 1, 2, 3}
		req.Topics = append(req.Topics, rt)
	}
	resp := call[*kmsg.ListPartitionReassignmentsResponse](t, nd.fc, nil, req)
	if resp.ErrorCode != 0 {
		t.Fatalf("list: code %d", resp.ErrorCode)
	}
	out := map[string]map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
	for _, rt := range resp.Topics {
		out[rt.Topic] = map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
		for _, p := range rt.Partitions {
			out[rt.Topic][p.Partition] = p
		}
	}
	return out
}

// TestClusterReassignment: reassignments through a broker that is not the controller:
// a move completed by the controller once the leader (played by the test) adds the new
// replica to the ISR, a pure removal that completes at once, a cancel, and the errors.
func TestClusterReassignment(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	f := c.follower()
	a := c.third(l, f).id
	if rt := createTopicOn(t, f, "mv", -1, -1, map[int32][]int32{0: {l.id, f.id}, 1: {l.id, f.id}, 2: {f.id, l.id}}); rt.ErrorCode != 0 {
		t.Fatalf("create mv: %d", rt.ErrorCode)
	}
	if rt := createTopicOn(t, f, "rf3", -1, -1, map[int32][]int32{0: {l.id, f.id, a}}); rt.ErrorCode != 0 {
		t.Fatalf("create rf3: %d", rt.ErrorCode)
	}
	// mv-0 moves from {l f} to {f a}: l (the leader) is removed. mv-2 moves too (and is
	// cancelled below). rf3-0 only drops a.
	resp := call[*kmsg.AlterPartitionAssignmentsResponse](t, f.fc, nil, reassignReq("mv", map[int32][]int32{0: {f.id, a}, 2: {f.id, a}}))
	if codes := reassignCodes(resp); resp.ErrorCode != 0 || len(codes) != 2 || codes[0] != 0 || codes[2] != 0 {
		t.Fatalf("start: %d %v", resp.ErrorCode, codes)
	}
	resp = call[*kmsg.AlterPartitionAssignmentsResponse](t, f.fc, nil, reassignReq("rf3", map[int32][]int32{0: {l.id, f.id}}))
	if codes := reassignCodes(resp); codes[0] != 0 {
		t.Fatalf("start rf3: %v", codes)
	}
	im := f.m.Image()
	if p := im.Partition("mv", 0); !slices.Equal(p.Replicas, []int32{f.id, a, l.id}) || !slices.Equal(p.AddingReplicas, []int32{a}) ||
		!slices.Equal(p.RemovingReplicas, []int32{l.id}) || p.Leader != l.id {
		t.Fatalf("mv-0 after start: %+v", *p)
	}
	// The controller completes rf3-0 at once: its ISR already holds the target.
	c.waitAll(10*time.Second, "rf3-0 shrunk to its target", func(im *kernel.Image) bool {
		p := im.Partition("rf3", 0)
		return p != nil && slices.Equal(p.Replicas, []int32{l.id, f.id}) && slices.Equal(p.ISR, []int32{l.id, f.id}) && !reassigning(p)
	})
	listed := listReassignments(t, f, "mv", "rf3", "nope")
	if len(listed) != 1 || len(listed["mv"]) != 2 {
		t.Fatalf("listed %+v", listed)
	}
	if p := listed["mv"][0]; !slices.Equal(p.Replicas, []int32{f.id, a, l.id}) || !slices.Equal(p.AddingReplicas, []int32{a}) || !slices.Equal(p.RemovingReplicas, []int32{l.id}) {
		t.Errorf("listed mv-0 %+v", p)
	}
	// Null topics list every reassignment too.
	all := call[*kmsg.ListPartitionReassignmentsResponse](t, l.fc, nil, kmsg.NewPtrListPartitionReassignmentsRequest())
	if len(all.Topics) != 1 || len(all.Topics[0].Partitions) != 2 {
		t.Errorf("list all: %+v", all.Topics)
	}

	// Cancel mv-2: back to {f l}.
	resp = call[*kmsg.AlterPartitionAssignmentsResponse](t, f.fc, nil, reassignReq("mv", map[int32][]int32{2: nil}))
	if codes := reassignCodes(resp); codes[2] != 0 {
		t.Fatalf("cancel: %v", codes)
	}
	if p := f.m.Image().Partition("mv", 2); !slices.Equal(p.Replicas, []int32{f.id, l.id}) || reassigning(p) || p.Leader != f.id {
		t.Errorf("mv-2 after cancel: %+v", *p)
	}
	// Errors.
	resp = call[*kmsg.AlterPartitionAssignmentsResponse](t, f.fc, nil, reassignReq("mv", map[int32][]int32{1: nil, 2: {a, a}, 3: {a}}))
	codes := reassignCodes(resp)
	if codes[1] != kerr.NoReassignmentInProgress.Code || codes[2] != kerr.InvalidReplicaAssignment.Code || codes[3] != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("errors: %v", codes)
	}
	resp = call[*kmsg.AlterPartitionAssignmentsResponse](t, f.fc, nil, reassignReq("mv", map[int32][]int32{2: {f.id, 42}, 1: {}}))
	if codes := reassignCodes(resp); codes[2] != kerr.InvalidReplicaAssignment.Code || codes[1] != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("unknown broker, empty: %v", codes)
	}
	resp = call[*kmsg.AlterPartitionAssignmentsResponse](t, f.fc, nil, reassignReq("nope", map[int32][]int32{0: {a}}))
	if codes := reassignCodes(resp); codes[0] != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %v", codes)
	}
	deny := denyAuthorizer{ops: map[kernel.Operation]bool{kernel.OpAlter: true, kernel.OpDescribe: true}, cluster: true}
	resp = call[*kmsg.AlterPartitionAssignmentsResponse](t, f.fc, deny, reassignReq("mv", map[int32][]int32{2: {a}}))
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || reassignCodes(resp)[2] != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("denied alter: %+v", resp)
	}
	if lresp := call[*kmsg.ListPartitionReassignmentsResponse](t, f.fc, deny, kmsg.NewPtrListPartitionReassignmentsRequest()); lresp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("denied list: %+v", lresp)
	}

	// The leader, l, adds a to mv-0's ISR once a caught up: the controller completes the
	// move and gives leadership to the first target replica in the ISR, f.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := f.m.Image().Partition("mv", 0)
	tp := f.m.Image().Topic("mv")
	got, err := f.m.AlterPartition(ctx, kernel.AlterPartitionRequest{Topic: "mv", TopicID: tp.ID, Partition: 0,
		Leader: l.id, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{l.id, f.id, a}})
	if err != nil {
		t.Fatalf("expand: %v", err)
	}
	if !slices.Contains(got.ISR, a) {
		t.Fatalf("after expand: %+v", got)
	}
	c.waitAll(10*time.Second, "mv-0 moved to {f a}, led by f", func(im *kernel.Image) bool {
		p := im.Partition("mv", 0)
		return slices.Equal(p.Replicas, []int32{f.id, a}) && slices.Equal(p.ISR, []int32{f.id, a}) && p.Leader == f.id && !reassigning(p)
	})
	if listed := listReassignments(t, f, "mv"); len(listed) != 0 {
		t.Errorf("still listed: %+v", listed)
	}
	// The old leader's next AlterPartition is refused: it no longer leads.
	_, err = f.m.AlterPartition(ctx, kernel.AlterPartitionRequest{Topic: "mv", TopicID: tp.ID, Partition: 0,
		Leader: l.id, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1, ISR: []int32{l.id}})
	if !kerrIs(err, kerr.NotLeaderForPartition) {
		t.Errorf("old leader: %v", err)
	}
}
