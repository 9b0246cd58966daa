package groups_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// stable848 heartbeats ms until the group is Stable with every member at the group
// epoch, and returns the description.
func stable848(t *testing.T, cl *kgo.Client, group string, ms ...*m848) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	var d kmsg.ConsumerGroupDescribeResponseGroup
	waitFor(t, 15*time.Second, group+" stable", func() string {
		for _, m := range ms {
			m.ack()
		}
		d = describe848(t, cl, group)
		if d.State != "Stable" || len(d.Members) != len(ms) {
			return "state " + d.State
		}
		for _, mb := range d.Members {
			if mb.MemberEpoch != d.Epoch {
				return "a member is behind the group epoch"
			}
		}
		return ""
	})
	return d
}

// KIP-848 members keep their epochs and assignments across a broker restart: the
// group's records in __consumer_offsets are replayed on load, so members heartbeat on
// at their epochs (no FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID, no new group epoch), a
// member that left before the restart stays gone, and an empty group keeps its epoch.
func TestConsumerGroup848SurvivesRestart(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(fastGroupConfig))
	adm := b.Admin(t)
	createTopic(t, adm, "kr", 6)
	cl := b.Client(t)
	x := join848(t, cl, "g-kr", nil, "kr")
	y := join848(t, cl, "g-kr", nil, "kr")
	z := join848(t, cl, "g-kr", nil, "kr")
	stable848(t, cl, "g-kr", x, y, z)
	z.leave()
	before := stable848(t, cl, "g-kr", x, y)
	e := join848(t, cl, "g-empty", nil, "kr")
	stable848(t, cl, "g-empty", e)
	e.leave()
	emptyEpoch := describe848(t, cl, "g-empty").Epoch

	b.Restart(t)
	cl = b.Client(t)
	for _, m := range []*m848{x, y} {
		m.cl = cl
		epoch, assigned := m.epoch, parts848(m.assigned)
		waitFor(t, 15*time.Second, "a heartbeat after the restart", func() string {
			// The client's own retries can run out while the coordinator loads.
			resp, err := tryHB848(cl, m.beatRequest(m.assigned))
			if err != nil {
				return err.Error()
			}
			m.apply(resp)
			if resp.ErrorCode != 0 {
				return errName848(resp.ErrorCode)
			}
			return ""
		})
		if m.epoch != epoch || !slices.Equal(parts848(m.assigned), assigned) {
			t.Errorf("member %s: epoch %d and partitions %v after the restart, want %d and %v",
				m.id, m.epoch, parts848(m.assigned), epoch, assigned)
		}
	}
	after := describe848(t, cl, "g-kr")
	if after.Epoch != before.Epoch || after.AssignmentEpoch != before.AssignmentEpoch || after.State != "Stable" || len(after.Members) != 2 {
		t.Errorf("after the restart: epoch %d assignment epoch %d state %s with %d members; before: %d, %d, %s with %d",
			after.Epoch, after.AssignmentEpoch, after.State, len(after.Members), before.Epoch, before.AssignmentEpoch, before.State, len(before.Members))
	}
	for _, mb := range after.Members {
		if mb.MemberID == z.id {
			t.Errorf("member %s left before the restart and is back", z.id)
		}
	}
	if d := describe848(t, cl, "g-empty"); d.State != "Empty" || d.Epoch != emptyEpoch {
		t.Errorf("empty group after the restart: state %s epoch %d, want Empty at %d", d.State, d.Epoch, emptyEpoch)
	}
	// An epoch the coordinator never gave is still fenced after the restart.
	wrong := &m848{t: t, cl: cl, group: "g-kr", id: x.id, epoch: x.epoch + 5, assigned: tps848{}}
	if resp := wrong.beat(tps848{}); resp.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Errorf("a heartbeat at epoch %d (current %d) after the restart: %s, want FENCED_MEMBER_EPOCH", wrong.epoch, x.epoch, errName848(resp.ErrorCode))
	}
}

// kgo consumers in KIP-848 mode carry on across a broker restart: their heartbeats at
// their epochs are accepted, so kgo never declares its partitions lost or rejoins,
// member ids and epochs are what they were, and every record produced across the
// restart is consumed.
func TestConsumerGroup848KgoAcrossRestart(t *testing.T) {
	const topic, group = "kr-kgo", "g-kr-kgo"
	b := testbroker.Start(t, testbroker.WithConfig(fastGroupConfig))
	adm := b.Admin(t)
	createTopic(t, adm, topic, 4)
	var lost atomic.Int32
	seen := newSeenSet()
	for _, name := range []string{"k1", "k2"} {
		startConsumer(t, b, name, seen, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.WithContext(nextGen()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.HeartbeatInterval(100*time.Millisecond), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) { lost.Add(1) }))
	}
	cl := b.Client(t)
	var before kmsg.ConsumerGroupDescribeResponseGroup
	waitFor(t, 20*time.Second, "both kgo members stable", func() string {
		before = describe848(t, cl, group)
		if before.State != "Stable" || len(before.Members) != 2 {
			return "state " + before.State
		}
		return ""
	})
	epochs := map[string]int32{}
	for _, mb := range before.Members {
		epochs[mb.MemberID] = mb.MemberEpoch
	}
	produceN(t, b.Client(t), topic, 100)
	want := map[string]bool{}
	for i := range 100 {
		want[fmt.Sprint(i)] = true
	}
	seen.waitConsumed(t, 20*time.Second, want)

	b.Restart(t)
	cl = b.Client(t)
	produceN(t, b.Client(t), topic, 200) // values 0-199: 100-199 are new
	for i := range 200 {
		want[fmt.Sprint(i)] = true
	}
	seen.waitConsumed(t, 30*time.Second, want)
	after := describe848(t, cl, group)
	if after.State != "Stable" || len(after.Members) != 2 {
		t.Errorf("after the restart: %s with %d members", after.State, len(after.Members))
	}
	for _, mb := range after.Members {
		e, ok := epochs[mb.MemberID]
		if !ok || mb.MemberEpoch < e {
			t.Errorf("member %s at epoch %d after the restart (before: %d, known %v)", mb.MemberID, mb.MemberEpoch, e, ok)
		}
	}
	if n := lost.Load(); n != 0 {
		t.Errorf("kgo declared its partitions lost %d times across the restart", n)
	}
}
