package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/brokerproc"
)

type quorumJSON struct {
	Leader  int32 `json:"leader"`
	Members []struct {
		Node int32  `json:"node"`
		Role string `json:"role"`
	} `json:"members"`
}

// voters returns the quorum's voters (the leader included) and observers, sorted.
func (q quorumJSON) split() (voters, observers []int32) {
	for _, m := range q.Members {
		if m.Role == "observer" {
			observers = append(observers, m.Node)
		} else {
			voters = append(voters, m.Node)
		}
	}
	slices.Sort(voters)
	slices.Sort(observers)
	return voters, observers
}

// The dynamic controller quorum (KIP-853) with the CLI over four broker processes:
// a single voter grows to three while the others keep working, the controller is
// SIGKILLed and replaced by a fourth broker, and the quorum then survives losing
// another of its first voters.
func TestClusterVoterCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("four broker processes")
	}
	raft, _ := brokerproc.RaftVoters(t, 4)
	procs := make([]*brokerproc.Proc, 4)
	for i := range procs {
		// Every broker knows node 1 only: the bootstrap voter; the others join the
		// log as observers.
		cfg := fmt.Sprintf(`node_id: %d
configs: {broker.session.timeout.ms: "3000", broker.heartbeat.interval.ms: "300", auto.create.topics.enable: "false"}
modules:
  metadata: {use: raft, raft_listen: %q, voters: ["1@%s"]}
`, i+1, raft[i], raft[0])
		procs[i] = brokerproc.StartNoWait(t, brokerproc.Options{Config: cfg})
	}
	for _, p := range procs {
		p.WaitReady()
	}
	addrs := func(ids ...int32) string {
		var as []string
		for _, id := range ids {
			as = append(as, procs[id-1].Addr)
		}
		return strings.Join(as, ",")
	}
	waitQuorum := func(at string, what string, voters, observers []int32, leaderIn ...int32) int32 {
		t.Helper()
		var leader int32
		poll(t, 40*time.Second, what, func() string {
			rc, out, errs := cli(t, at, "cluster", "quorum", "--json")
			var q quorumJSON
			if rc != 0 || json.Unmarshal([]byte(out), &q) != nil {
				return fmt.Sprintf("exit %d %s %s", rc, out, errs)
			}
			v, o := q.split()
			if !slices.Equal(v, voters) || !slices.Equal(o, observers) || !slices.Contains(leaderIn, q.Leader) {
				return out
			}
			leader = q.Leader
			return ""
		})
		return leader
	}
	waitQuorum(addrs(1, 2, 3, 4), "one voter, three observers", []int32{1}, []int32{2, 3, 4}, 1)

	// Grow to three voters while a topic is written to.
	mustCLI(t, addrs(1, 2, 3, 4), "topic", "create", "grow", "-p", "3", "-r", "3")
	produce := func(p *brokerproc.Proc, v string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Client(t).ProduceSync(ctx, &kgo.Record{Topic: "grow", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	produce(procs[3], "before")
	out := mustCLI(t, addrs(2), "cluster", "add-voter", "2", "3")
	wantLines(t, out, "2", "3", "added")
	produce(procs[3], "after")
	waitQuorum(addrs(1, 2, 3, 4), "voters 1-3, observer 4", []int32{1, 2, 3}, []int32{4}, 1, 2, 3)
	if rc, _, _ := cli(t, addrs(1), "cluster", "add-voter", "2"); rc == 0 {
		t.Error("adding a voter twice succeeded")
	}
	if rc, _, _ := cli(t, addrs(1), "cluster", "add-voter", "9"); rc == 0 {
		t.Error("adding a node that is not a broker succeeded")
	}

	// The controller dies; the quorum of 2 and 3 elects another, which replaces it
	// with broker 4.
	leader := waitQuorum(addrs(1, 2, 3), "a leader", []int32{1, 2, 3}, []int32{4}, 1, 2, 3)
	procs[leader-1].Kill()
	var live []int32
	for _, id := range []int32{1, 2, 3, 4} {
		if id != leader {
			live = append(live, id)
		}
	}
	var remaining []int32 // the first voters still alive
	for _, id := range []int32{1, 2, 3} {
		if id != leader {
			remaining = append(remaining, id)
		}
	}
	waitQuorum(addrs(live...), "a new leader", []int32{1, 2, 3}, []int32{4}, remaining...)
	// Once the dead broker is fenced, removing it forgets it; a live voter removed
	// would stay an observer.
	poll(t, 30*time.Second, fmt.Sprintf("broker %d down", leader), func() string {
		_, out, _ := cli(t, addrs(live...), "cluster", "health", "--json")
		var h healthJSON
		if json.Unmarshal([]byte(out), &h) != nil || !slices.Contains(h.DownBrokers, leader) {
			return out
		}
		return ""
	})
	out = mustCLI(t, addrs(live...), "cluster", "remove-voter", strconv.Itoa(int(leader)))
	wantLines(t, out, "removed")
	mustCLI(t, addrs(live...), "cluster", "add-voter", "4")
	want := append(slices.Clone(remaining), 4)
	slices.Sort(want)
	leader2 := waitQuorum(addrs(live...), "the dead voter replaced by 4", want, nil, remaining...)

	// Losing one more of the first voters leaves a quorum with broker 4 in it.
	procs[leader2-1].Kill()
	var last []int32
	for _, id := range live {
		if id != leader2 {
			last = append(last, id)
		}
	}
	waitQuorum(addrs(last...), "a leader among the last two", want, nil, last...)
	mustCLI(t, addrs(last...), "topic", "create", "after", "-p", "1", "-r", "1")
	// What was acknowledged while the quorum grew is still there.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons := procs[last[0]-1].Client(t, kgo.ConsumeTopics("grow"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 2 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %v, want before and after", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"after", "before"}) {
		t.Fatalf("consumed %v, want after and before", got)
	}
}
