package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/brokerproc"
)

// poll retries cond every 100 ms until it returns "" or d passes.
func poll(t *testing.T, d time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s (%s)", d, what, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type healthJSON struct {
	Healthy         bool    `json:"healthy"`
	Controller      int32   `json:"controller"`
	Brokers         []int32 `json:"brokers"`
	DownBrokers     []int32 `json:"down_brokers"`
	UnderReplicated []struct {
		Topic string `json:"topic"`
	} `json:"under_replicated_partitions"`
}

// threeBrokers starts three broker processes forming one cluster (all raft voters)
// and returns them, ready, with their addresses as a --brokers list.
func threeBrokers(t *testing.T) ([]*brokerproc.Proc, string) {
	t.Helper()
	raft, voters := brokerproc.RaftVoters(t, 3)
	procs := make([]*brokerproc.Proc, 3)
	for i := range procs {
		cfg := fmt.Sprintf(`node_id: %d
configs: {broker.session.timeout.ms: "3000", broker.heartbeat.interval.ms: "300", auto.create.topics.enable: "false"}
modules:
  metadata: {use: raft, raft_listen: %q, voters: %s}
`, i+1, raft[i], voters)
		procs[i] = brokerproc.StartNoWait(t, brokerproc.Options{Config: cfg})
	}
	for _, p := range procs {
		p.WaitReady()
	}
	all := procs[0].Addr + "," + procs[1].Addr + "," + procs[2].Addr
	return procs, all
}

// The CLI against three broker processes: replicated topics, cluster info, health
// that turns unhealthy (exit 1) when a broker is SIGKILLed, and reads that go on.
func TestKafkaCommandsCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three broker processes")
	}
	procs, all := threeBrokers(t)

	mustCLI(t, all, "topic", "create", "rep", "-p", "3", "-r", "3", "-c", "min.insync.replicas=2")
	health := func(addr string) (int, healthJSON) {
		rc, out, _ := cli(t, addr, "cluster", "health", "--json")
		var h healthJSON
		_ = json.Unmarshal([]byte(out), &h)
		return rc, h
	}
	// Every broker's metadata must hold rep before "healthy" means anything: a
	// broker that has not applied the creation yet reports no partitions at all.
	poll(t, 30*time.Second, "rep's partitions with full ISRs", func() string {
		rc, out, _ := cli(t, all, "topic", "describe", "rep", "--json")
		var d []struct {
			Partitions []struct {
				ISR []int32 `json:"isr"`
			} `json:"partitions"`
		}
		if rc != 0 || json.Unmarshal([]byte(out), &d) != nil || len(d) != 1 || len(d[0].Partitions) != 3 {
			return fmt.Sprintf("exit %d %s", rc, out)
		}
		for _, p := range d[0].Partitions {
			if len(p.ISR) != 3 {
				return out
			}
		}
		return ""
	})
	poll(t, 30*time.Second, "a healthy cluster", func() string {
		if rc, h := health(all); rc != 0 || !h.Healthy || len(h.Brokers) != 3 {
			return fmt.Sprintf("exit %d %+v", rc, h)
		}
		return ""
	})
	var info struct {
		Controller int32 `json:"controller"`
		Brokers    []struct {
			ID       int32 `json:"id"`
			Replicas int   `json:"replicas"`
		} `json:"brokers"`
	}
	// Polled too: the broker answering may be another one than the describe's.
	poll(t, 30*time.Second, "cluster info with every broker holding rep", func() string {
		if err := json.Unmarshal([]byte(mustCLI(t, all, "cluster", "info", "--json")), &info); err != nil {
			t.Fatal(err)
		}
		if info.Controller < 1 || len(info.Brokers) != 3 {
			return fmt.Sprintf("cluster info: %+v", info)
		}
		for _, b := range info.Brokers {
			if b.Replicas < 3 { // each holds a replica of every partition of rep
				return fmt.Sprintf("broker %d holds %d replicas: %+v", b.ID, b.Replicas, info)
			}
		}
		return ""
	})
	out := mustCLI(t, all, "topic", "describe", "rep")
	wantLines(t, out, "PARTITIONS  3", "min.insync.replicas")
	var perr bytes.Buffer
	if err := produceRun([]string{"rep", "--brokers", all}, strings.NewReader("a\nb\nc\nd\n"), &bytes.Buffer{}, &perr); err != nil {
		t.Fatalf("produce: %v %s", err, perr.String())
	}

	// reassign: an RF 1 partition with data moves onto all three brokers, then onto
	// one other broker alone; each command waits until the move is done.
	mustCLI(t, all, "topic", "create", "moved", "-p", "1", "-r", "1")
	// The create answers once the broker it asked has the topic; the others apply it
	// a moment later, and the describes below may ask any of them.
	for _, p := range procs {
		poll(t, 10*time.Second, "broker "+p.Addr+" knows moved", func() string {
			if rc, out, errs := cli(t, p.Addr, "topic", "describe", "moved"); rc != 0 {
				return out + errs
			}
			return ""
		})
	}
	perr.Reset()
	if err := produceRun([]string{"moved", "--brokers", all}, strings.NewReader("x\ny\nz\n"), &bytes.Buffer{}, &perr); err != nil {
		t.Fatalf("produce: %v %s", err, perr.String())
	}
	replicas := func() []int32 {
		var d []struct {
			Partitions []struct {
				Replicas []int32 `json:"replicas"`
				ISR      []int32 `json:"isr"`
			} `json:"partitions"`
		}
		if err := json.Unmarshal([]byte(mustCLI(t, all, "topic", "describe", "moved", "--json")), &d); err != nil || len(d) != 1 || len(d[0].Partitions) != 1 {
			t.Fatalf("describe moved: %v %+v", err, d)
		}
		p := d[0].Partitions[0]
		r := slices.Clone(p.Replicas)
		slices.Sort(r)
		isr := slices.Clone(p.ISR)
		slices.Sort(isr)
		if !slices.Equal(r, isr) {
			t.Fatalf("after a finished move the ISR %v is not the replicas %v", p.ISR, p.Replicas)
		}
		return p.Replicas
	}
	orig := replicas()[0]
	other := orig%3 + 1
	out = mustCLI(t, all, "topic", "reassign", "moved", "-p", fmt.Sprintf("0:%d,%d,%d", other, 6-orig-other, orig)) // ids 1, 2 and 3
	wantLines(t, out, "REPLICAS", "done")
	if got := replicas(); len(got) != 3 || got[0] != other {
		t.Fatalf("replicas after growing to three: %v", got)
	}
	out = mustCLI(t, all, "topic", "reassign", "moved", "-p", fmt.Sprintf("0:%d", other), "--json")
	var rows []reassignRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0].Status != "done" {
		t.Fatalf("reassign --json: %v %s", err, out)
	}
	if got := replicas(); !slices.Equal(got, []int32{other}) {
		t.Fatalf("replicas after moving to broker %d: %v", other, got)
	}
	if out := mustCLI(t, all, "consume", "moved", "-e", "-f", `%v\n`); out != "x\ny\nz\n" {
		t.Fatalf("consumed %q after the moves", out)
	}
	if rc, out, errs := cli(t, all, "topic", "reassign", "moved", "-p", "0:1,9"); rc != 1 || !strings.Contains(out+errs, "failed") {
		t.Fatalf("reassign onto an unknown broker: exit %d %s %s", rc, out, errs)
	}
	if rc, _, _ := cli(t, all, "topic", "reassign", "moved", "-p", "0"); rc != 2 {
		t.Fatalf("reassign without brokers: exit %d", rc)
	}

	procs[2].Kill()
	survivors := procs[0].Addr + "," + procs[1].Addr
	poll(t, 30*time.Second, "health to report broker 3 down", func() string {
		rc, h := health(survivors)
		if rc != 1 || h.Healthy || !slices.Equal(h.DownBrokers, []int32{3}) || len(h.UnderReplicated) != 3 {
			return fmt.Sprintf("exit %d %+v", rc, h)
		}
		return ""
	})
	out = mustCLI(t, survivors, "topic", "describe", "rep", "--json")
	if strings.Contains(out, `"leader": 3`) {
		t.Fatalf("broker 3 still leads after its kill:\n%s", out)
	}
	out = mustCLI(t, survivors, "consume", "rep", "-e", "-f", `%v\n`)
	got := strings.Fields(out)
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("consumed %q after the kill", got)
	}
}
