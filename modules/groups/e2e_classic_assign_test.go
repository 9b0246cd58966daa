package groups_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// setGroupAssignor sets (or with name "" deletes) the group config
// sluice.consumer.assignor with IncrementalAlterConfigs on a GROUP resource.
func setGroupAssignor(t testing.TB, cl *kgo.Client, group, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = "sluice.consumer.assignor", kmsg.IncrementalAlterConfigOpSet, ptr(name)
	if name == "" {
		c.Op, c.Value = kmsg.IncrementalAlterConfigOpDelete, nil
	}
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs GROUP %s: %+v", group, resp.Resources)
	}
}

// balanced reports why byName does not give each member parts/n partitions or one more.
func balanced(byName map[string][]int32, parts int) string {
	n := len(byName)
	for name, ps := range byName {
		if len(ps) < parts/n || len(ps) > parts/n+1 {
			return fmt.Sprintf("%s has %d partitions (%v)", name, len(ps), ps)
		}
	}
	return ""
}

// Classic-protocol members of a group whose config names an assignor are assigned by
// that assignor on the coordinator: kgo members with different balancers (no protocol
// in common, which a leader-assigned group refuses), cooperative and eager, get the
// range assignor's balanced answer; partitions move between cooperative members only after
// their owner revoked them; every record is consumed; and deleting the config gives
// the group back to its leader.
func TestClassicServerAssigned(t *testing.T) {
	const topic, group, parts = "srv", "g-srv", 12
	b, adm := startWithTopic(t, fastGroupConfig, topic, parts)
	cl := b.Client(t)
	setGroupAssignor(t, cl, group, "range")
	prod := startProducer(t, b, topic, parts)
	seen := newSeenSet()
	opts := fastGroupOpts(group, topic)
	coop := append(slices.Clone(opts), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	eager := append(slices.Clone(opts), kgo.Balancers(kgo.RoundRobinBalancer()))

	c1 := startConsumer(t, b, "c1", seen, coop...)
	stableAssignment(t, adm, group, topic, parts, []*consumer{c1})
	c2 := startConsumer(t, b, "c2", seen, eager...)
	stableAssignment(t, adm, group, topic, parts, []*consumer{c1, c2})
	c3 := startConsumer(t, b, "c3", seen, coop...)
	cs := []*consumer{c1, c2, c3}
	var three map[string][]int32
	waitFor(t, 20*time.Second, "a balanced assignment over three members", func() string {
		three = stableAssignment(t, adm, group, topic, parts, cs)
		return balanced(three, parts)
	})
	t.Logf("assignment: %v", three)
	d, err := describeGroup(adm, group, 5*time.Second)
	if err != nil || d.Protocol != "range" {
		t.Errorf("DescribeGroups: protocol %q (err %v), want range", d.Protocol, err)
	}
	for _, c := range cs {
		c.mu.Lock()
		errs := c.fetchEr
		c.mu.Unlock()
		if len(errs) > 0 {
			t.Errorf("%s: fetch errors %v", c.name, errs)
		}
	}
	seen.waitConsumed(t, 20*time.Second, prod.Stop())

	// Without the config the group is the leader's again: members with no protocol in
	// common cannot join one group, and a group with one balancer is assigned by it.
	setGroupAssignor(t, cl, group, "")
	c2.stop()
	c3.stop()
	c1.stop()
	waitFor(t, 15*time.Second, "group empty", func() string {
		d, err := describeGroup(adm, group, 5*time.Second)
		if err != nil {
			return err.Error()
		}
		if d.State != "Empty" {
			return "state " + d.State
		}
		return ""
	})
	r1 := startConsumer(t, b, "r1", nil, eager...)
	r2 := startConsumer(t, b, "r2", nil, eager...)
	stableAssignment(t, adm, group, topic, parts, []*consumer{r1, r2})
	if d, err := describeGroup(adm, group, 5*time.Second); err != nil || d.Protocol != "roundrobin" {
		t.Errorf("DescribeGroups without the config: protocol %q (err %v), want roundrobin", d.Protocol, err)
	}
}
