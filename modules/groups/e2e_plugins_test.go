package groups_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/metricstest"
	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups"
)

// pluginStats reads GET /v1/plugins from the admin listener.
func pluginStats(t testing.TB, b *testbroker.Broker) map[string]groups.PluginStats {
	t.Helper()
	resp, err := http.Get("http://" + b.AdminAddr + "/v1/plugins")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Plugins []groups.PluginStats `json:"plugins"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	out := map[string]groups.PluginStats{}
	for _, p := range body.Plugins {
		out[p.Name] = p
	}
	return out
}

// targets returns each member's target partition count and the group's target epoch.
func targets(g kmsg.ConsumerGroupDescribeResponseGroup) map[string]int {
	out := map[string]int{}
	for _, m := range g.Members {
		n := 0
		for _, tp := range m.TargetAssignment.TopicPartitions {
			n += len(tp.Partitions)
		}
		out[m.MemberID] = n
	}
	return out
}

// smallestGetsAll reports "" when the member with the smallest id is targeted all
// parts partitions (the test plugin's answer).
func smallestGetsAll(g kmsg.ConsumerGroupDescribeResponseGroup, parts int) string {
	ts := targets(g)
	ids := make([]string, 0, len(ts))
	for id := range ts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(ids) == 0 || ts[ids[0]] != parts {
		return fmt.Sprintf("targets %v (epoch %d/%d), want all %d to the smallest id", ts, g.Epoch, g.AssignmentEpoch, parts)
	}
	return ""
}

// spread reports "" when every member is targeted parts/len partitions (uniform).
func spread(g kmsg.ConsumerGroupDescribeResponseGroup, members, parts int) string {
	ts := targets(g)
	if len(ts) != members || g.AssignmentEpoch != g.Epoch {
		return fmt.Sprintf("targets %v (epoch %d/%d)", ts, g.Epoch, g.AssignmentEpoch)
	}
	for _, n := range ts {
		if n != parts/members {
			return fmt.Sprintf("targets %v, want %d each", ts, parts/members)
		}
	}
	return ""
}

func writeMode(t testing.TB, file, mode string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(mode), 0o644); err != nil {
		t.Fatal(err)
	}
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// A KIP-848 group uses the plugin (the broker default here, and when named); a
// SIGKILLed plugin mid-rebalance leaves the group converging with the fallback, the
// supervisor restarts it and a later rebalance uses it again; Stop leaves no process.
func TestAssignorPluginE2E(t *testing.T) {
	bin := groups.BuildTestAssignorPlugin(t)
	modeFile := filepath.Join(t.TempDir(), "mode")
	writeMode(t, modeFile, "good")
	b := testbroker.Start(t, testbroker.WithConfig(groupConfig+fmt.Sprintf(`
modules:
  groups:
    assignors:
      - name: smallest
        plugin: %s
        timeout_ms: 5000
        env: {SLUICE_TEST_ASSIGNOR_MODE_FILE: %s}
      - {name: range, plugin: %s}
      - uniform
`, bin, modeFile, bin)))
	adm := b.Admin(t)
	createTopic(t, adm, "tp", 6)
	cl := b.Client(t)
	st := pluginStats(t, b)["smallest"]
	if st.State != groups.PluginRunning || !alive(st.PID) {
		t.Fatalf("plugin after start: %+v", st)
	}

	// Raw members naming no assignor: the broker default, the plugin.
	d1 := join848(t, cl, "gd", nil, "tp")
	d2 := join848(t, cl, "gd", nil, "tp")
	waitFor(t, 10*time.Second, "default plugin assignment", func() string {
		d1.ack()
		d2.ack()
		return smallestGetsAll(describe848(t, cl, "gd"), 6)
	})

	// kgo consumers with the range balancer ask for "range": here a plugin that
	// replaces the built-in.
	var cs []*kgo.Client
	for range 2 {
		c := b.Client(t, kgo.ConsumerGroup("gk"), kgo.ConsumeTopics("tp"), kgo.WithContext(nextGen()),
			kgo.Balancers(kgo.RangeBalancer()))
		cs = append(cs, c)
		go func() {
			for {
				if fs := c.PollFetches(context.Background()); fs.IsClientClosed() {
					return
				}
			}
		}()
	}
	waitFor(t, 30*time.Second, "kgo group assigned by the plugin", func() string {
		g := describe848(t, cl, "gk")
		if len(g.Members) != 2 || g.State != "Stable" {
			return fmt.Sprintf("state %s, %d members", g.State, len(g.Members))
		}
		if g.AssignorName != "range" {
			return "assignor " + g.AssignorName
		}
		return smallestGetsAll(g, 6)
	})
	if s := pluginStats(t, b)["range"]; s.Calls == 0 || s.Errors != 0 {
		t.Fatalf("range plugin: %+v", s)
	}
	for _, c := range cs {
		c.Close()
	}

	// Raw members naming the plugin.
	named := func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = ptr("smallest") }
	a := join848(t, cl, "gr", named, "tp")
	m2 := join848(t, cl, "gr", named, "tp")
	a.ack()
	m2.ack()
	waitFor(t, 10*time.Second, "plugin assignment", func() string { return smallestGetsAll(describe848(t, cl, "gr"), 6) })
	before := pluginStats(t, b)["smallest"]
	if before.Calls == 0 || before.Errors != 0 {
		t.Fatalf("stats %+v", before)
	}
	// The same figures at /metrics.
	ms := metricstest.Scrape(t, b.AdminAddr)
	if up, _ := ms.Value("sluice_assignor_plugin_up", "assignor", "smallest"); up != 1 {
		t.Fatalf("sluice_assignor_plugin_up %v", up)
	}
	if calls, _ := ms.Value("sluice_assignor_plugin_calls_total", "assignor", "smallest"); calls < float64(before.Calls) {
		t.Fatalf("sluice_assignor_plugin_calls_total %v, stats %d", calls, before.Calls)
	}

	// SIGKILL the plugin while it computes a rebalance: the join's assignment call
	// fails and the fallback (uniform) answers.
	writeMode(t, modeFile, "hang")
	joined := make(chan *m848, 1)
	go func() {
		r := joinReq848("gr", newID848(), "tp")
		r.ServerAssignor = ptr("smallest")
		resp := hb848(t, cl, r)
		m := &m848{t: t, cl: cl, group: "gr", id: r.MemberID, assigned: tps848{}}
		m.apply(resp)
		joined <- m
	}()
	time.Sleep(500 * time.Millisecond) // the call is in the plugin
	writeMode(t, modeFile, "good")     // what the restarted plugin will do
	if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m3 := <-joined
	waitFor(t, 10*time.Second, "fallback assignment", func() string {
		a.ack()
		m2.ack()
		m3.ack()
		return spread(describe848(t, cl, "gr"), 3, 6)
	})
	var after groups.PluginStats
	waitFor(t, 10*time.Second, "plugin restarted", func() string {
		after = pluginStats(t, b)["smallest"]
		if after.State != groups.PluginRunning || after.Restarts != 1 || after.PID == before.PID || !alive(after.PID) {
			return fmt.Sprintf("%+v", after)
		}
		return ""
	})
	if after.Errors == 0 || after.Fallbacks == 0 || alive(before.PID) {
		t.Fatalf("after the kill: %+v (old pid alive %v)", after, alive(before.PID))
	}

	// A later rebalance uses the plugin again.
	m3.leave()
	waitFor(t, 10*time.Second, "plugin assignment after the restart", func() string {
		a.ack()
		m2.ack()
		return smallestGetsAll(describe848(t, cl, "gr"), 6)
	})

	rangePID := pluginStats(t, b)["range"].PID
	b.Stop()
	if alive(after.PID) || alive(rangePID) {
		t.Fatalf("plugin processes %d, %d: alive after the broker stopped: %v, %v", after.PID, rangePID, alive(after.PID), alive(rangePID))
	}
}

// Invalid answers, hangs and a plugin that cannot start: groups still converge with
// the fallback, errors are counted and the states shown. The group config
// sluice.consumer.assignor picks a plugin for a group whose members name none.
func TestAssignorPluginE2EFallbacks(t *testing.T) {
	bin := groups.BuildTestAssignorPlugin(t)
	item := func(name, mode string, timeout int) string {
		return fmt.Sprintf("      - {name: %s, plugin: %s, timeout_ms: %d, env: {SLUICE_TEST_ASSIGNOR_MODE: %s}}\n", name, bin, timeout, mode)
	}
	b := testbroker.Start(t, testbroker.WithConfig(groupConfig+`
modules:
  groups:
    assignors:
      - uniform
`+item("smallest", "good", 2000)+item("bad", "invalid", 2000)+item("slow", "hang", 200)+item("dead", "exit-at-start", 2000)))
	adm := b.Admin(t)
	createTopic(t, adm, "tf", 6)
	cl := b.Client(t)

	for _, name := range []string{"bad", "slow", "dead"} {
		group := "g-" + name
		named := func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = ptr(name) }
		x := join848(t, cl, group, named, "tf")
		y := join848(t, cl, group, named, "tf")
		waitFor(t, 10*time.Second, group+" converges with the fallback", func() string {
			x.ack()
			y.ack()
			g := describe848(t, cl, group)
			if g.State != "Stable" {
				return "state " + g.State
			}
			return spread(g, 2, 6)
		})
	}
	st := pluginStats(t, b)
	for name, want := range map[string][]string{
		"bad":  {groups.PluginRunning},
		"slow": {groups.PluginRunning},
		"dead": {groups.PluginRestarting, groups.PluginFailed},
	} {
		s := st[name]
		if !slices.Contains(want, s.State) || s.Errors == 0 || s.Fallbacks == 0 || s.LastError == "" {
			t.Errorf("%s: %+v, want state in %v with errors", name, s, want)
		}
	}
	if s := st["slow"]; !strings.Contains(s.LastError, "no answer within 200ms") {
		t.Errorf("slow: last error %q", s.LastError)
	}
	if s := st["bad"]; !strings.Contains(s.LastError, "invalid assignment") {
		t.Errorf("bad: last error %q", s.LastError)
	}

	// Per-group configured assignor (no member names one): written as the metadata
	// module writes IncrementalAlterConfigs on a GROUP resource.
	es, ok := b.Kernel.Module("metadata").(kernel.ExtensionStore)
	if !ok {
		t.Skip("metadata module has no ExtensionStore")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := es.PutExtension(ctx, groups.GroupConfigsNamespace, "g-cfg", []byte(`{"sluice.consumer.assignor":"smallest"}`)); err != nil {
		t.Fatal(err)
	}
	if err := es.PutExtension(ctx, groups.GroupConfigsNamespace, "g-cfg-wins", []byte(`{"sluice.consumer.assignor":"smallest"}`)); err != nil {
		t.Fatal(err)
	}
	if err := es.PutExtension(ctx, groups.GroupConfigsNamespace, "g-unknown", []byte(`{"sluice.consumer.assignor":"nope"}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "extension visible", func() string {
		if b.Kernel.Module("metadata").(kernel.Metadata).Image().Extension(groups.GroupConfigsNamespace, "g-unknown") == nil {
			return "not yet"
		}
		return ""
	})
	uniform := func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = ptr("uniform") }
	for _, tc := range []struct {
		group, what, assignor string
		named                 func(*kmsg.ConsumerGroupHeartbeatRequest)
		check                 func(kmsg.ConsumerGroupDescribeResponseGroup) string
	}{
		{"g-cfg", "the group's configured assignor", "smallest", nil, func(g kmsg.ConsumerGroupDescribeResponseGroup) string { return smallestGetsAll(g, 6) }},
		{"g-cfg-wins", "the configured assignor over the members' named one", "smallest", uniform, func(g kmsg.ConsumerGroupDescribeResponseGroup) string { return smallestGetsAll(g, 6) }},
		{"g-unknown", "the default for an unknown configured assignor", "uniform", nil, func(g kmsg.ConsumerGroupDescribeResponseGroup) string { return spread(g, 2, 6) }},
	} {
		x := join848(t, cl, tc.group, tc.named, "tf")
		y := join848(t, cl, tc.group, tc.named, "tf")
		waitFor(t, 10*time.Second, tc.what, func() string {
			x.ack()
			y.ack()
			g := describe848(t, cl, tc.group)
			if g.AssignorName != tc.assignor {
				return "assignor " + g.AssignorName
			}
			return tc.check(g)
		})
	}

	pids := []int{}
	for _, s := range pluginStats(t, b) {
		if s.PID != 0 {
			pids = append(pids, s.PID)
		}
	}
	b.Stop()
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("plugin process %d alive after the broker stopped", pid)
		}
	}
}
