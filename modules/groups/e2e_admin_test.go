package groups_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// TestClassicAdmin drives ListGroups, DescribeGroups, Lag, DeleteGroups and
// DeleteOffsets through kadm against a live group and groups that only have offsets.
func TestClassicAdmin(t *testing.T) {
	const topic, other, live, empty, empty2 = "adm", "adm-other", "g-live", "g-empty", "g-empty2"
	const parts = 4
	b := testbroker.Start(t, testbroker.WithConfig(fastGroupConfig))
	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createTopic(t, adm, topic, parts)
	createTopic(t, adm, other, 1)
	produceN(t, b.Client(t, kgo.DefaultProduceTopic(topic)), topic, 200)
	produceN(t, b.Client(t, kgo.DefaultProduceTopic(other)), other, 5)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}

	seen := newSeenSet()
	opts := append(fastGroupOpts(live, topic), kgo.Balancers(kgo.RangeBalancer()))
	a1 := startConsumer(t, b, "a1", seen, opts...)
	a2 := startConsumer(t, b, "a2", seen, opts...)
	stableAssignment(t, adm, live, topic, parts, []*consumer{a1, a2})
	waitFor(t, 10*time.Second, "the live group to consume and commit everything", func() string {
		lag, err := adm.Lag(ctx, live)
		if err != nil {
			return err.Error()
		}
		l := lag[live]
		if err := l.Error(); err != nil {
			return err.Error()
		}
		if tot := l.Lag.Total(); tot != 0 {
			return "lag " + fmtMap(map[string]int64{"total": tot})
		}
		return ""
	})

	// Groups with offsets only (simple commits to a group without members).
	commit := func(group string, os map[string]map[int32]int64) {
		t.Helper()
		var o kadm.Offsets
		for tp, ps := range os {
			for p, at := range ps {
				o.AddOffset(tp, p, at, -1)
			}
		}
		resp, err := adm.CommitOffsets(ctx, group, o)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit to %s: %v", group, err)
		}
	}
	commit(empty, map[string]map[int32]int64{topic: {0: 1, 1: 1, 2: 1, 3: 1}})
	commit(empty2, map[string]map[int32]int64{topic: {0: 2, 1: 2}, other: {0: 3}})

	// ListGroups, with and without a state filter.
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := lg[live]; !ok || g.State != "Stable" || g.ProtocolType != "consumer" {
		t.Errorf("ListGroups: %s is %+v, want Stable consumer group", live, lg[live])
	}
	if g, ok := lg[empty]; !ok || g.State != "Empty" {
		t.Errorf("ListGroups: %s is %+v, want Empty", empty, lg[empty])
	}
	if lg, err := adm.ListGroups(ctx, "Empty"); err != nil {
		t.Fatal(err)
	} else if names := lg.Groups(); !slices.Equal(names, []string{empty, empty2}) {
		t.Errorf("ListGroups(Empty) = %v, want [%s %s]", names, empty, empty2)
	}
	if lg, err := adm.ListGroups(ctx, "Stable"); err != nil {
		t.Fatal(err)
	} else if names := lg.Groups(); !slices.Equal(names, []string{live}) {
		t.Errorf("ListGroups(Stable) = %v, want [%s]", names, live)
	}

	// DescribeGroups: members with client ids, hosts, subscriptions and assignments.
	ds, err := adm.DescribeGroups(ctx, live, empty, "g-nonexistent")
	if err != nil {
		t.Fatal(err)
	}
	d := ds[live]
	if d.Err != nil || d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != "range" {
		t.Errorf("DescribeGroups(%s): err %v state %q type %q protocol %q", live, d.Err, d.State, d.ProtocolType, d.Protocol)
	}
	var clients []string
	covered := 0
	for _, m := range d.Members {
		clients = append(clients, m.ClientID)
		if m.ClientHost != "/127.0.0.1" {
			t.Errorf("member %s host %q, want /127.0.0.1", m.MemberID, m.ClientHost)
		}
		if j, ok := m.Join.AsConsumer(); !ok || !slices.Equal(j.Topics, []string{topic}) {
			t.Errorf("member %s subscription %+v, want [%s]", m.MemberID, j, topic)
		}
		a, ok := m.Assigned.AsConsumer()
		if !ok || len(a.Topics) != 1 || a.Topics[0].Topic != topic || len(a.Topics[0].Partitions) != parts/2 {
			t.Errorf("member %s assignment %+v, want %d partitions of %s", m.MemberID, a, parts/2, topic)
		} else {
			covered += len(a.Topics[0].Partitions)
		}
	}
	slices.Sort(clients)
	if !slices.Equal(clients, []string{"a1", "a2"}) || covered != parts {
		t.Errorf("members' client ids %v, %d partitions assigned; want [a1 a2], %d", clients, covered, parts)
	}
	if d := ds[empty]; d.Err != nil || d.State != "Empty" || len(d.Members) != 0 {
		t.Errorf("DescribeGroups(%s): err %v state %q members %d, want Empty", empty, d.Err, d.State, len(d.Members))
	}
	if d := ds["g-nonexistent"]; d.State != "Dead" && !errors.Is(d.Err, kerr.GroupIDNotFound) {
		t.Errorf("DescribeGroups(g-nonexistent): err %v state %q, want Dead or GROUP_ID_NOT_FOUND", d.Err, d.State)
	}

	// Lag of the offsets-only group: everything past offset 1.
	lag, err := adm.Lag(ctx, empty)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset - 1 })
	if got := lag[empty].Lag.Total(); got != want {
		t.Errorf("lag of %s = %d, want %d", empty, got, want)
	}

	// DeleteGroups: not while members are in it.
	if err := deleteGroup(t, ctx, adm, live); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Errorf("DeleteGroups(live group) = %v, want NON_EMPTY_GROUP", err)
	}
	// v3 says why.
	dreq := kmsg.NewPtrDeleteGroupsRequest()
	dreq.Version, dreq.Groups = 3, []string{live}
	if dresp, err := dreq.RequestWith(ctx, b.Client(t)); err != nil || len(dresp.Groups) != 1 ||
		dresp.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code || dresp.Groups[0].ErrorMessage == nil ||
		!strings.Contains(*dresp.Groups[0].ErrorMessage, "has members") {
		t.Errorf("DeleteGroups v3 (live group) = %v %+v", err, dresp)
	}
	wantDeleted(t, ctx, adm, empty, "empty group")
	if lg, err := adm.ListGroups(ctx); err != nil {
		t.Fatal(err)
	} else if _, ok := lg[empty]; ok {
		t.Errorf("deleted group still listed")
	}
	if err := deleteGroup(t, ctx, adm, empty); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("DeleteGroups(deleted group) = %v, want GROUP_ID_NOT_FOUND", err)
	}

	// DeleteOffsets: fine on an empty group, refused for a topic a live group consumes.
	del, err := adm.DeleteOffsets(ctx, empty2, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := del.Error(); err != nil {
		t.Errorf("DeleteOffsets on an empty group: %v", err)
	}
	if offs := fetchAll(t, adm, empty2); !equalOffsets(offs, map[string]map[int32]int64{other: {0: 3}}) {
		t.Errorf("offsets after DeleteOffsets: %v, want only %s/0 at 3", offs, other)
	}
	del, err = adm.DeleteOffsets(ctx, live, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if err, _ := del.Lookup(topic, 0); !errors.Is(err, kerr.GroupSubscribedToTopic) {
		t.Errorf("DeleteOffsets of a subscribed topic of a live group: %v, want GROUP_SUBSCRIBED_TO_TOPIC", err)
	}
	if offs := fetchAll(t, adm, live); offs[topic][0] != ends[topic][0].Offset {
		t.Errorf("live group's offset of %s/0 is %d after a refused delete, want %d", topic, offs[topic][0], ends[topic][0].Offset)
	}

	// Once its members leave, the group is Empty and can be deleted.
	a1.stop()
	a2.stop()
	waitFor(t, 10*time.Second, "the live group to become Empty", func() string {
		ds, err := adm.DescribeGroups(ctx, live)
		if err != nil {
			return err.Error()
		}
		if st := ds[live].State; st != "Empty" {
			return st
		}
		return ""
	})
	wantDeleted(t, ctx, adm, live, "group after its members left")
}

// deleteGroup sends DeleteGroups for group and returns the group's error.
func deleteGroup(t testing.TB, ctx context.Context, adm *kadm.Client, group string) error {
	t.Helper()
	dr, err := adm.DeleteGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	return dr[group].Err
}

// wantDeleted deletes group (what it is, for messages) and checks that its offsets
// went with it.
func wantDeleted(t testing.TB, ctx context.Context, adm *kadm.Client, group, what string) {
	t.Helper()
	if err := deleteGroup(t, ctx, adm, group); err != nil {
		t.Errorf("DeleteGroups(%s) = %v", what, err)
	}
	if offs := fetchAll(t, adm, group); len(offs) != 0 {
		t.Errorf("offsets of the deleted group: %v", offs)
	}
}

// fetchAll returns a group's committed offsets.
func fetchAll(t testing.TB, adm *kadm.Client, group string) map[string]map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	out := map[string]map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.At
	})
	return out
}

func equalOffsets(a, b map[string]map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if len(ps) != len(b[t]) {
			return false
		}
		for p, at := range ps {
			if bat, ok := b[t][p]; !ok || bat != at {
				return false
			}
		}
	}
	return true
}
