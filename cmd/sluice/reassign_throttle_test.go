package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Wrong uses of --throttle and --clear-throttle exit 2 before any broker is asked.
func TestReassignThrottleUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"zero", []string{"-p", "0:1,2", "--throttle", "0"}, "positive whole number"},
		{"negative", []string{"-p", "0:1,2", "--throttle", "-5"}, "positive whole number"},
		{"not a number", []string{"-p", "0:1,2", "--throttle", "1MB"}, "positive whole number"},
		{"fraction", []string{"-p", "0:1,2", "--throttle", "1.5"}, "positive whole number"},
		{"with cancel", []string{"--cancel", "-p", "0", "--throttle", "1000"}, "not to --cancel"},
		{"clear with a move", []string{"--clear-throttle", "-p", "0:1"}, "--clear-throttle takes no"},
		{"clear with throttle", []string{"--clear-throttle", "--throttle", "1000"}, "--clear-throttle takes no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"topic", "reassign", "thr"}, tc.args...)
			if rc, out, errs := cli(t, "127.0.0.1:1", args...); rc != 2 || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, want 2 and %q\nstdout: %s\nstderr: %s", rc, tc.want, out, errs)
			}
		})
	}
}

// reassign --throttle on three broker processes: with --no-wait the topic's
// throttled-replicas lists hold the move's entries next to what they held, the
// brokers of the move (only those) have the rates, and --clear-throttle removes it
// all; a move that waits leaves nothing behind once done ("*" stays "*"); a wait
// that fails leaves the throttle for --clear-throttle.
func TestReassignThrottleCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three broker processes")
	}
	procs, all := threeBrokers(t)
	adm := procs[0].Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	mustCLI(t, all, "topic", "create", "thr", "-p", "2", "-r", "1")
	var perr bytes.Buffer
	if err := produceRun([]string{"thr", "--brokers", all, "-p", "0"}, strings.NewReader("a\nb\nc\nd\n"), &bytes.Buffer{}, &perr); err != nil {
		t.Fatalf("produce: %v %s", err, perr.String())
	}
	// partition returns partition p's replicas and ISR, each sorted.
	partition := func(p int) (replicas, isr []int32) {
		var d []struct {
			Partitions []struct {
				Replicas []int32 `json:"replicas"`
				ISR      []int32 `json:"isr"`
			} `json:"partitions"`
		}
		out := mustCLI(t, all, "topic", "describe", "thr", "--json")
		if err := json.Unmarshal([]byte(out), &d); err != nil || len(d) != 1 || len(d[0].Partitions) != 2 {
			t.Fatalf("describe thr: %v %s", err, out)
		}
		r, i := slices.Clone(d[0].Partitions[p].Replicas), slices.Clone(d[0].Partitions[p].ISR)
		slices.Sort(r)
		slices.Sort(i)
		return r, i
	}
	// topicConfig is the topic's own setting of name ("" when it has none).
	topicConfig := func(name string) string {
		rcs, err := adm.DescribeTopicConfigs(ctx, "thr")
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			t.Fatalf("describe thr's configs: %v %+v", err, rcs)
		}
		for _, c := range rcs[0].Configs {
			if c.Key == name && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
				return c.MaybeValue()
			}
		}
		return ""
	}
	// onEveryBroker waits until each broker's DescribeConfigs shows the topic's lists
	// as given: the command merges into the lists it reads from one broker's image
	// (see modules/metadata/skipped.md).
	onEveryBroker := func(leaderList, followerList string) {
		t.Helper()
		for _, p := range procs {
			badm := p.Admin(t)
			poll(t, 30*time.Second, "the lists on "+p.Addr, func() string {
				rcs, err := badm.DescribeTopicConfigs(ctx, "thr")
				if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
					return fmt.Sprintf("describe: %v", err)
				}
				got := map[string]string{}
				for _, c := range rcs[0].Configs {
					if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
						got[c.Key] = c.MaybeValue()
					}
				}
				if got[leaderThrottledReplicas] != leaderList || got[followerThrottledReplicas] != followerList {
					return fmt.Sprintf("%q and %q", got[leaderThrottledReplicas], got[followerThrottledReplicas])
				}
				return ""
			})
		}
	}
	// brokerRates are broker id's own settings of the two throttle rates.
	brokerRates := func(id int32) (leader, follower string) {
		rcs, err := adm.DescribeBrokerConfigs(ctx, id)
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			t.Fatalf("describe broker %d's configs: %v %+v", id, err, rcs)
		}
		for _, c := range rcs[0].Configs {
			if c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
				continue
			}
			switch c.Key {
			case leaderThrottledRate:
				leader = c.MaybeValue()
			case followerThrottledRate:
				follower = c.MaybeValue()
			}
		}
		return leader, follower
	}
	// throttleState says how the topic's lists and each broker's rates differ from
	// want ("" when they do not).
	throttleState := func(leaderList, followerList string, rates map[int32]string) string {
		if got := topicConfig(leaderThrottledReplicas); got != leaderList {
			return fmt.Sprintf("%s = %q, want %q", leaderThrottledReplicas, got, leaderList)
		}
		if got := topicConfig(followerThrottledReplicas); got != followerList {
			return fmt.Sprintf("%s = %q, want %q", followerThrottledReplicas, got, followerList)
		}
		for id := int32(1); id <= 3; id++ {
			if l, f := brokerRates(id); l != rates[id] || f != rates[id] {
				return fmt.Sprintf("broker %d's rates are %q and %q, want %q", id, l, f, rates[id])
			}
		}
		return ""
	}

	r0, _ := partition(0)
	r1, _ := partition(1)
	orig, other := r0[0], r0[0]%3+1
	third := 6 - orig - other
	// An entry for the other partition, which the command must keep.
	kept := fmt.Sprintf("1:%d", r1[0])
	mustCLI(t, all, "topic", "alter-config", "thr", "--set", leaderThrottledReplicas+"="+kept)
	onEveryBroker(kept, "")

	// --no-wait: the throttle is set and stays.
	rc, out, errs := cli(t, all, "topic", "reassign", "thr", "-p", fmt.Sprintf("0:%d,%d", orig, other), "--throttle", "1000000", "--no-wait")
	if rc != 0 || !strings.Contains(out, "started") || !strings.Contains(errs, "sluice topic reassign thr --clear-throttle") {
		t.Fatalf("reassign --throttle --no-wait: exit %d\nstdout: %s\nstderr: %s", rc, out, errs)
	}
	poll(t, 30*time.Second, "the throttle of the move in place", func() string {
		return throttleState(fmt.Sprintf("%s,0:%d", kept, orig), fmt.Sprintf("0:%d", other),
			map[int32]string{orig: "1000000", other: "1000000"})
	})
	poll(t, 30*time.Second, "the move done", func() string {
		if r, isr := partition(0); !slices.Equal(r, isr) || len(r) != 2 || !slices.Contains(r, other) {
			return fmt.Sprintf("replicas %v, ISR %v", r, isr)
		}
		return ""
	})
	out = mustCLI(t, all, "topic", "reassign", "thr", "--clear-throttle")
	wantLines(t, out, "RESOURCE", "topic thr", "broker 1", "broker 2", "broker 3", "cleared")
	poll(t, 30*time.Second, "the throttle cleared", func() string { return throttleState("", "", nil) })

	// Waiting: what the command added goes once the move is done; "*" stays.
	mustCLI(t, all, "topic", "alter-config", "thr", "--set", leaderThrottledReplicas+"="+kept, "--set", followerThrottledReplicas+"=*")
	onEveryBroker(kept, "*")
	rc, out, errs = cli(t, all, "topic", "reassign", "thr", "-p", fmt.Sprintf("0:%d", third), "--throttle", "1000000")
	if rc != 0 || !strings.Contains(out, "done") || !strings.Contains(errs, "removed the replication throttle") {
		t.Fatalf("reassign --throttle: exit %d\nstdout: %s\nstderr: %s", rc, out, errs)
	}
	poll(t, 30*time.Second, "only what was there before the move", func() string { return throttleState(kept, "*", nil) })
	if r, _ := partition(0); !slices.Equal(r, []int32{third}) {
		t.Fatalf("replicas after the move to broker %d: %v", third, r)
	}
	if out := mustCLI(t, all, "consume", "thr", "-p", "0", "-e", "-f", `%v\n`); out != "a\nb\nc\nd\n" {
		t.Fatalf("consumed %q after the moves", out)
	}

	// A wait that fails leaves the throttle in place and says how to clear it. At 1
	// byte/s the new replica gets one fetch's worth (replica.fetch.max.bytes, 1 MiB)
	// and then nothing for the rate's window, so 3 MiB cannot move within the wait.
	line := strings.Repeat("x", 1023) + "\n"
	perr.Reset()
	if err := produceRun([]string{"thr", "--brokers", all, "-p", "0"}, strings.NewReader(strings.Repeat(line, 3<<10)), &bytes.Buffer{}, &perr); err != nil {
		t.Fatalf("produce: %v %s", err, perr.String())
	}
	rc, out, errs = cli(t, all, "topic", "reassign", "thr", "-p", fmt.Sprintf("0:%d", orig), "--throttle", "1", "--wait", "2s")
	if rc != 1 || !strings.Contains(out, "in progress") || !strings.Contains(errs, "the move has not finished") ||
		!strings.Contains(errs, "sluice topic reassign thr --clear-throttle") {
		t.Fatalf("reassign --throttle 1 --wait 2s: exit %d\nstdout: %s\nstderr: %s", rc, out, errs)
	}
	poll(t, 30*time.Second, "the throttle left in place", func() string {
		return throttleState(fmt.Sprintf("%s,0:%d", kept, third), "*", map[int32]string{orig: "1", third: "1"})
	})
	mustCLI(t, all, "topic", "reassign", "thr", "--clear-throttle")
	poll(t, 30*time.Second, "the throttle cleared", func() string { return throttleState("", "", nil) })
	poll(t, time.Minute, "the move done without the throttle", func() string {
		if r, isr := partition(0); !slices.Equal(r, []int32{orig}) || !slices.Equal(isr, r) {
			return fmt.Sprintf("replicas %v, ISR %v", r, isr)
		}
		return ""
	})
	out = mustCLI(t, all, "consume", "thr", "-p", "0", "-e", "-f", `%v\n`)
	if n := strings.Count(out, "\n"); n != 4+3<<10 || !strings.HasPrefix(out, "a\nb\nc\nd\nxxx") {
		t.Fatalf("consumed %d records after the moves", n)
	}
}
