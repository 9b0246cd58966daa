package groups_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// buildExampleAssignor builds examples/assignors/<name> into a temporary directory.
func buildExampleAssignor(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	out, err := exec.Command("go", "build", "-o", bin, "../../examples/assignors/"+name).CombinedOutput()
	if err != nil {
		t.Fatalf("build example assignor %s: %v\n%s", name, err, out)
	}
	return bin
}

// described returns member id → topic → sorted target partitions, or a reason
// the group is not settled yet (not Stable, target epoch behind, or a member's
// assignment not yet its target).
func described(g kmsg.ConsumerGroupDescribeResponseGroup, members int) (map[string]map[string][]int32, string) {
	if g.State != "Stable" || g.AssignmentEpoch != g.Epoch || len(g.Members) != members {
		return nil, fmt.Sprintf("state %s, epoch %d/%d, %d members", g.State, g.Epoch, g.AssignmentEpoch, len(g.Members))
	}
	out := map[string]map[string][]int32{}
	for _, m := range g.Members {
		target := flatDescribed848(m.TargetAssignment)
		if cur := flatDescribed848(m.Assignment); fmt.Sprint(cur) != fmt.Sprint(target) {
			return nil, fmt.Sprintf("member %s owns %v, target %v", m.MemberID, cur, target)
		}
		out[m.MemberID] = target
	}
	return out, ""
}

// The example rack-aware plugin gets the partitions' replica racks from the broker
// (rack r1 hosts every replica here) and gives the rack-local member the partitions
// the rack-blind assignment would leave with the other member; a kgo group (rack
// r1) assigned by the plugin consumes everything.
func TestPluginExampleRackAwareE2E(t *testing.T) {
	bin := buildExampleAssignor(t, "rack-aware")
	b := testbroker.Start(t, testbroker.WithConfig(groupConfig+fmt.Sprintf(`
rack: r1
modules:
  groups:
    assignors:
      - uniform
      - {name: rack-aware, plugin: %s}
      - {name: range, plugin: %s}
`, bin, bin)))
	adm := b.Admin(t)
	createTopic(t, adm, "tr", 6)
	cl := b.Client(t)

	// B (rack r2, no replica there) joins first and owns all 6; then A (rack r1,
	// every replica there) joins. The example's passes (its doc comment): quotas
	// are 3 each; pass 1 keeps current rack-local partitions (B has none); pass 2
	// gives the other rack-local partitions, ascending, to A up to its quota:
	// 0, 1, 2; pass 3 lets B keep the rest of its current ones: 3, 4, 5. Without
	// PartitionRacks, pass 3 would let B keep 0, 1, 2 and A would get 3, 4, 5.
	// Uniform gives 3 and 3 too (its rack preference needs members that send racks in
	// their heartbeats; these do not).
	for _, tc := range []struct {
		assignor string
		wantA    []int32 // nil: any 3
	}{
		{"rack-aware", []int32{0, 1, 2}},
		{"uniform", nil},
	} {
		group := "g-" + tc.assignor
		with := func(rack string) func(*kmsg.ConsumerGroupHeartbeatRequest) {
			return func(r *kmsg.ConsumerGroupHeartbeatRequest) {
				r.Version = 1
				r.RackID = ptr(rack)
				r.ServerAssignor = ptr(tc.assignor)
			}
		}
		mb := join848(t, cl, group, with("r2"), "tr")
		waitFor(t, 10*time.Second, group+": B alone owns everything", func() string {
			mb.ack()
			d, why := described(describe848(t, cl, group), 1)
			if why != "" {
				return why
			}
			if got := d[mb.id]["tr"]; len(got) != 6 {
				return fmt.Sprintf("B owns %v", got)
			}
			return ""
		})
		ma := join848(t, cl, group, with("r1"), "tr")
		var final map[string]map[string][]int32
		waitFor(t, 15*time.Second, group+": two members stable", func() string {
			mb.ack()
			ma.ack()
			g := describe848(t, cl, group)
			if g.AssignorName != tc.assignor {
				return "assignor " + g.AssignorName
			}
			d, why := described(g, 2)
			if why != "" {
				return why
			}
			final = d
			return ""
		})
		a, bp := final[ma.id]["tr"], final[mb.id]["tr"]
		t.Logf("%s: A (r1) %v, B (r2) %v", tc.assignor, a, bp)
		if len(a) != 3 || len(bp) != 3 {
			t.Errorf("%s: A %v, B %v, want 3 and 3", tc.assignor, a, bp)
		}
		if all := slices.Sorted(slices.Values(append(slices.Clone(a), bp...))); !slices.Equal(all, []int32{0, 1, 2, 3, 4, 5}) {
			t.Errorf("%s: partitions assigned %v", tc.assignor, all)
		}
		if tc.wantA != nil && !slices.Equal(a, tc.wantA) {
			t.Errorf("%s: A (rack-local) got %v, want %v", tc.assignor, a, tc.wantA)
		}
		ma.leave()
		mb.leave()
	}

	// A kgo group: kgo in KIP-848 mode always names a server assignor (range for
	// the range balancer), and the group config sluice.consumer.assignor (set here
	// with IncrementalAlterConfigs on a GROUP resource) wins over it: the plugin
	// serves the group although no client names it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g-kgo"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Op, cfg.Value = "sluice.consumer.assignor", kmsg.IncrementalAlterConfigOpSet, ptr("rack-aware")
	res.Configs = append(res.Configs, cfg)
	iac.Resources = append(iac.Resources, res)
	iacResp, err := iac.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(iacResp.Resources) != 1 || iacResp.Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs GROUP: %+v", iacResp.Resources)
	}
	calls := pluginStats(t, b)["rack-aware"].Calls

	const n = 300
	produceN(t, cl, "tr", n)
	want := map[string]bool{}
	for i := range n {
		want[fmt.Sprint(i)] = true
	}
	seen := newSeenSet()
	startConsumer(t, b, "kgo-r1", seen, kgo.ConsumerGroup("g-kgo"), kgo.ConsumeTopics("tr"),
		kgo.WithContext(nextGen()), kgo.Rack("r1"), kgo.Balancers(kgo.RangeBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	waitFor(t, 30*time.Second, "kgo consumes everything with the plugin", func() string {
		if g := describe848(t, cl, "g-kgo"); g.AssignorName != "rack-aware" {
			return fmt.Sprintf("assignor %q, state %s", g.AssignorName, g.State)
		}
		if missing, ex := seen.missing(want); missing > 0 {
			return fmtMissing(missing, n, ex)
		}
		return ""
	})
	if st := pluginStats(t, b)["rack-aware"]; st.Calls <= calls || st.Errors != 0 || st.Fallbacks != 0 {
		t.Errorf("the plugin did not serve the kgo group: %+v (calls before %d)", st, calls)
	}
}
