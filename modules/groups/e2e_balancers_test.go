package groups_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClassicBalancers runs three members of one group through each of kgo's client
// side balancers while a producer writes: members join one at a time and leave one at
// a time. At every stable point the broker's assignment must be disjoint, cover every
// partition and agree with what each client thinks it owns; every acknowledged record
// must be consumed; a member that restarts must resume at the committed offsets.
func TestClassicBalancers(t *testing.T) {
	for _, bc := range []struct {
		name string
		bal  kgo.GroupBalancer
		coop bool
	}{
		{"cooperative-sticky", kgo.CooperativeStickyBalancer(), true},
		{"range", kgo.RangeBalancer(), false},
		{"roundrobin", kgo.RoundRobinBalancer(), false},
		{"sticky", kgo.StickyBalancer(), false},
	} {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			testBalancer(t, bc.bal, bc.coop)
		})
	}
}

func testBalancer(t *testing.T, bal kgo.GroupBalancer, coop bool) {
	const topic, group, parts = "events", "g-bal", 12
	b, adm := startWithTopic(t, fastGroupConfig, topic, parts)
	prod := startProducer(t, b, topic, parts)
	seen := newSeenSet()
	opts := append(fastGroupOpts(group, topic), kgo.Balancers(bal))

	c1 := startConsumer(t, b, "c1", seen, opts...)
	stableAssignment(t, adm, group, topic, parts, []*consumer{c1})
	c2 := startConsumer(t, b, "c2", seen, opts...)
	two := stableAssignment(t, adm, group, topic, parts, []*consumer{c1, c2})
	c3 := startConsumer(t, b, "c3", seen, opts...)
	three := stableAssignment(t, adm, group, topic, parts, []*consumer{c1, c2, c3})
	t.Logf("two members: %v; three: %v", two, three)
	if coop {
		// The join of c3 may only take partitions from c1 and c2 for c3, and no more
		// than c3's fair share.
		before := map[int32]string{}
		for name, ps := range two {
			for _, p := range ps {
				before[p] = name
			}
		}
		moved := 0
		for name, ps := range three {
			for _, p := range ps {
				if before[p] == name {
					continue
				}
				moved++
				if name != "c3" {
					t.Errorf("partition %d moved from %s to %s when c3 joined", p, before[p], name)
				}
			}
		}
		if moved > (parts+2)/3 {
			t.Errorf("%d partitions moved when c3 joined, want <= %d", moved, (parts+2)/3)
		}
	}

	// Restart c3: a new client resumes where the group committed.
	c3.stop()
	stableAssignment(t, adm, group, topic, parts, []*consumer{c1, c2})
	committed := map[int32]int64{}
	waitFor(t, 10*time.Second, "offsets committed for every partition", func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err.Error()
		}
		if err := offs.Error(); err != nil {
			return err.Error()
		}
		clear(committed)
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic && o.At >= 0 {
				committed[o.Partition] = o.At
			}
		})
		if len(committed) != parts {
			return "committed partitions: " + fmtMap(committed)
		}
		return ""
	})
	c3b := startConsumer(t, b, "c3b", seen, opts...)
	got := stableAssignment(t, adm, group, topic, parts, []*consumer{c1, c2, c3b})
	waitFor(t, 10*time.Second, "c3b consumed from each of its partitions", func() string {
		c3b.mu.Lock()
		defer c3b.mu.Unlock()
		for _, p := range got["c3b"] {
			if _, ok := c3b.first[p]; !ok {
				return "nothing yet from some partition"
			}
		}
		return ""
	})
	c3b.mu.Lock()
	for p, first := range c3b.first {
		if first < committed[p] {
			t.Errorf("restarted member read partition %d from offset %d, below the committed %d", p, first, committed[p])
		}
	}
	c3b.mu.Unlock()

	c3b.stop()
	stableAssignment(t, adm, group, topic, parts, []*consumer{c1, c2})
	c2.stop()
	stableAssignment(t, adm, group, topic, parts, []*consumer{c1})
	acked := prod.Stop()
	seen.waitConsumed(t, 15*time.Second, acked)
	c1.stop()
	if len(acked) == 0 {
		t.Fatal("nothing was produced")
	}
	t.Logf("%d records produced and consumed", len(acked))
}
