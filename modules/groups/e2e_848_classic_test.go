package groups_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupType returns the type ListGroups shows for group, or "" when it is not listed.
func groupType(t *testing.T, cl *kgo.Client, group string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrListGroupsRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	for _, g := range resp.Groups {
		if g.Group == group {
			return g.GroupType
		}
	}
	return ""
}

// memberTypes counts a KIP-848 group's members by ConsumerGroupDescribe's member
// type: 0 classic, 1 consumer.
func memberTypes(g kmsg.ConsumerGroupDescribeResponseGroup) map[int8]int {
	out := map[int8]int{}
	for _, m := range g.Members {
		out[m.MemberType]++
	}
	return out
}

// TestConsumerGroupClassicMembers moves a live group between the protocols with the
// default group.consumer.migration.policy (bidirectional), while a producer runs: two
// classic kgo consumers (one eager, one cooperative) form a classic group; a KIP-848
// kgo consumer joins and upgrades it to a consumer group whose classic members are
// assigned by the server; the KIP-848 consumer leaves and the group downgrades to a
// classic group. At each stable point the broker's assignments are disjoint and cover
// the topic, and every consumer owns what it was assigned; every acknowledged record
// is consumed.
func TestConsumerGroupClassicMembers(t *testing.T) {
	const topic, group, parts = "mixed-members", "g-mixed-members", 6
	b, adm := startWithTopic(t, cfg848, topic, parts)
	cl := b.Client(t)
	prod := startProducer(t, b, topic, parts)
	seen := newSeenSet()
	opts := func(balancers ...kgo.GroupBalancer) []kgo.Opt {
		return append(fastGroupOpts(group, topic), kgo.Balancers(balancers...))
	}
	eager := startConsumer(t, b, "classic-eager", seen, opts(kgo.RangeBalancer(), kgo.CooperativeStickyBalancer())...)
	coop := startConsumer(t, b, "classic-coop", seen, opts(kgo.CooperativeStickyBalancer(), kgo.RangeBalancer())...)
	stableAssignment(t, adm, group, topic, parts, []*consumer{eager, coop})
	if typ := groupType(t, cl, group); typ != "classic" {
		t.Fatalf("before the upgrade ListGroups says %q", typ)
	}

	// Upgrade: a KIP-848 member joins.
	next := startConsumer(t, b, "kip848", seen, append(fastGroupOpts(group, topic), kgo.WithContext(nextGen()))...)
	waitFor(t, 20*time.Second, "the group upgraded with 2 classic members and 1 consumer member", func() string {
		g := describe848(t, cl, group)
		if g.ErrorCode != 0 {
			return errName848(g.ErrorCode)
		}
		if types := memberTypes(g); types[0] != 2 || types[1] != 1 {
			return fmt.Sprintf("member types %v", types)
		}
		return ""
	})
	got := stableAssignment(t, adm, group, topic, parts, []*consumer{eager, coop, next})
	for name, ps := range got {
		if len(ps) != 2 {
			t.Fatalf("after the upgrade %s has %v; want 2 partitions each: %v", name, ps, got)
		}
	}
	if typ := groupType(t, cl, group); typ != "consumer" {
		t.Fatalf("after the upgrade ListGroups says %q", typ)
	}

	// Downgrade: the KIP-848 member leaves, the classic protocol takes over.
	next.stop()
	waitFor(t, 20*time.Second, "the group downgraded to a classic group", func() string {
		if typ := groupType(t, cl, group); typ != "classic" {
			return "type " + typ
		}
		return ""
	})
	stableAssignment(t, adm, group, topic, parts, []*consumer{eager, coop})
	d, err := describeGroup(adm, group, 5*time.Second)
	if err != nil || d.ProtocolType != "consumer" || (d.Protocol != "range" && d.Protocol != "cooperative-sticky") {
		t.Fatalf("downgraded group: protocol type %q protocol %q, %v", d.ProtocolType, d.Protocol, err)
	}

	acked := prod.Stop()
	if len(acked) == 0 {
		t.Fatal("nothing produced")
	}
	seen.waitConsumed(t, 20*time.Second, acked)
	for _, c := range []*consumer{eager, coop, next} {
		c.mu.Lock()
		errs := c.fetchEr
		c.mu.Unlock()
		for _, err := range errs {
			// kgo reports a failed join or sync as a fetch error and rejoins. A
			// member whose join straddles a protocol change is told its generation
			// is gone or the group rebalances, as in Kafka.
			if errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.UnknownMemberID) {
				t.Logf("consumer %s: %v", c.name, err)
				continue
			}
			t.Fatalf("consumer %s fetch error: %v", c.name, err)
		}
	}
}

// TestConsumerGroupClassicStaticMember: a static classic kgo consumer joins a live
// KIP-848 group (the default policy admits it) and is assigned by the server; a
// restarted client with the same instance id takes its place with the same
// partitions; an admin's LeaveGroup by instance id removes it and the KIP-848 member
// gets every partition.
func TestConsumerGroupClassicStaticMember(t *testing.T) {
	const topic, group, parts = "mixed-static", "g-mixed-static", 4
	b, adm := startWithTopic(t, cfg848, topic, parts)
	cl := b.Client(t)
	next := startConsumer(t, b, "kip848", nil, append(fastGroupOpts(group, topic), kgo.WithContext(nextGen()))...)
	stableAssignment(t, adm, group, topic, parts, []*consumer{next})

	static := append(fastGroupOpts(group, topic), kgo.InstanceID("static-1"))
	first := startConsumer(t, b, "static-a", nil, static...)
	got := stableAssignment(t, adm, group, topic, parts, []*consumer{next, first})
	if len(got["static-a"]) != 2 {
		t.Fatalf("the classic member got %v: %v", got["static-a"], got)
	}
	if types := memberTypes(describe848(t, cl, group)); types[0] != 1 || types[1] != 1 {
		t.Fatalf("member types %v", types)
	}
	oldID := first.memberID()
	first.stop() // a static member does not leave

	second := startConsumer(t, b, "static-b", nil, static...)
	again := stableAssignment(t, adm, group, topic, parts, []*consumer{next, second})
	if second.memberID() == oldID || !slices.Equal(again["static-b"], got["static-a"]) {
		t.Fatalf("restarted static member %s (was %s) got %v, had %v", second.memberID(), oldID, again["static-b"], got["static-a"])
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resps, err := adm.LeaveGroup(ctx, kadm.LeaveGroup(group).InstanceIDs("static-1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resps {
		if r.Err != nil {
			t.Fatalf("LeaveGroup of the static member: %v", r.Err)
		}
	}
	second.stop()
	waitFor(t, 15*time.Second, "the KIP-848 member owns everything", func() string {
		g := describe848(t, cl, group)
		if len(g.Members) != 1 || len(flatDescribed848(g.Members[0].Assignment)[topic]) != parts {
			return fmt.Sprintf("%d members", len(g.Members))
		}
		return ""
	})
}

// TestConsumerGroupClassicMembersAcrossRestart: a consumer group with a classic and a
// KIP-848 kgo member survives a broker restart: both keep their member ids (the
// classic one is restored with its generation and protocols from Kafka's
// ClassicMemberMetadata, so its rejoin with its id is accepted), the KIP-848 one
// never declares its partitions lost, and every record produced across the restart
// is consumed. (kgo's classic consumer ends its session, and calls its lost callback,
// on any heartbeat error, the broker being down included.)
func TestConsumerGroupClassicMembersAcrossRestart(t *testing.T) {
	const topic, group, parts = "mixed-restart", "g-mixed-restart", 4
	b, adm := startWithTopic(t, fastGroupConfig, topic, parts)
	var lost atomic.Int32
	onLost := func(who string) kgo.Opt {
		return kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			t.Logf("%s lost %v", who, m)
			lost.Add(1)
		})
	}

	seen := newSeenSet()
	opts := append(fastGroupOpts(group, topic), kgo.SessionTimeout(10*time.Second), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	next := startConsumer(t, b, "kip848", seen, append(slices.Clone(opts), kgo.WithContext(nextGen()), onLost("kip848"))...)
	waitFor(t, 15*time.Second, "the KIP-848 member assigned", func() string {
		if len(next.ownedSet()) != parts {
			return fmt.Sprint(next.ownedSet())
		}
		return ""
	})
	old := startConsumer(t, b, "classic", seen, opts...)
	stableAssignment(t, adm, group, topic, parts, []*consumer{next, old})
	ids := map[string]string{"kip848": next.memberID(), "classic": old.memberID()}

	produceN(t, b.Client(t), topic, 100)
	want := map[string]bool{}
	for i := range 100 {
		want[fmt.Sprint(i)] = true
	}
	seen.waitConsumed(t, 20*time.Second, want)

	b.Restart(t)
	produceN(t, b.Client(t), topic, 200)
	for i := range 200 {
		want[fmt.Sprint(i)] = true
	}
	seen.waitConsumed(t, 30*time.Second, want)
	stableAssignment(t, b.Admin(t), group, topic, parts, []*consumer{next, old})
	if next.memberID() != ids["kip848"] || old.memberID() != ids["classic"] {
		t.Errorf("member ids after the restart %s, %s; before %v", next.memberID(), old.memberID(), ids)
	}
	if types := memberTypes(describe848(t, b.Client(t), group)); types[0] != 1 || types[1] != 1 {
		t.Errorf("member types after the restart %v", types)
	}
	if n := lost.Load(); n != 0 {
		t.Errorf("the KIP-848 member lost its partitions %d times across the restart", n)
	}
}

// classicJoin sends a JoinGroup of a new classic member subscribing to topic and
// returns its error code.
func classicJoin(t *testing.T, cl *kgo.Client, group, topic string) int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.ProtocolType = group, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10_000, 10_000
	meta := kmsg.ConsumerMemberMetadata{Topics: []string{topic}}
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.ErrorCode
}

// TestConsumerGroupMigrationPolicies walks the one-way policies with kgo members:
// "upgrade" upgrades a classic group on a KIP-848 join but admits no new classic
// member and never downgrades; "downgrade" refuses the KIP-848 join to a live classic
// group but admits classic members into a consumer group and downgrades it when its
// last KIP-848 member leaves. ("disabled": TestConsumer848MixedGroups; bidirectional:
// TestConsumerGroupClassicMembers.)
func TestConsumerGroupMigrationPolicies(t *testing.T) {
	const topic, parts = "policy", 4
	next848 := func(group string) []kgo.Opt {
		return append(fastGroupOpts(group, topic), kgo.WithContext(nextGen()))
	}
	t.Run("upgrade", func(t *testing.T) {
		const group = "g-policy-up"
		b, adm := startWithTopic(t, cfg848+"  group.consumer.migration.policy: upgrade\n", topic, parts)
		cl := b.Client(t)
		old := startConsumer(t, b, "classic", nil, fastGroupOpts(group, topic)...)
		stableAssignment(t, adm, group, topic, parts, []*consumer{old})
		next := startConsumer(t, b, "kip848", nil, next848(group)...)
		stableAssignment(t, adm, group, topic, parts, []*consumer{old, next})
		if typ := groupType(t, cl, group); typ != "consumer" {
			t.Fatalf("after the KIP-848 join the group is %q", typ)
		}
		if code := classicJoin(t, cl, group, topic); code != kerr.InconsistentGroupProtocol.Code {
			t.Fatalf("a new classic member under upgrade: %s", errName848(code))
		}
		next.stop()
		stableAssignment(t, adm, group, topic, parts, []*consumer{old})
		if typ := groupType(t, cl, group); typ != "consumer" {
			t.Fatalf("without KIP-848 members the group is %q; upgrade never downgrades", typ)
		}
	})
	t.Run("downgrade", func(t *testing.T) {
		const group = "g-policy-down"
		b, adm := startWithTopic(t, cfg848+"  group.consumer.migration.policy: downgrade\n", topic, parts)
		cl := b.Client(t)
		first := startConsumer(t, b, "classic-1", nil, fastGroupOpts(group, topic)...)
		stableAssignment(t, adm, group, topic, parts, []*consumer{first})
		resp := hb848(t, cl, joinReq848(group, newID848(), topic))
		want848(t, "KIP-848 join to a live classic group under downgrade", resp.ErrorCode, resp.ErrorMessage, kerr.GroupIDNotFound)
		first.stop()
		waitFor(t, 15*time.Second, "the classic group empty", func() string {
			d, err := describeGroup(adm, group, 5*time.Second)
			if err != nil || d.State != "Empty" {
				return fmt.Sprintf("%+v %v", d.State, err)
			}
			return ""
		})
		next := startConsumer(t, b, "kip848", nil, next848(group)...)
		stableAssignment(t, adm, group, topic, parts, []*consumer{next})
		second := startConsumer(t, b, "classic-2", nil, fastGroupOpts(group, topic)...)
		stableAssignment(t, adm, group, topic, parts, []*consumer{next, second})
		if types := memberTypes(describe848(t, cl, group)); types[0] != 1 || types[1] != 1 {
			t.Fatalf("member types %v", types)
		}
		next.stop()
		waitFor(t, 15*time.Second, "the group downgraded", func() string {
			if typ := groupType(t, cl, group); typ != "classic" {
				return typ
			}
			return ""
		})
		stableAssignment(t, adm, group, topic, parts, []*consumer{second})
	})
}
