//go:build linux

package metricstest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/brokerproc"
	"github.com/sluicehq/sluice/internal/metricstest"
	"github.com/sluicehq/sluice/internal/testbroker"
)

// startCluster starts three broker processes that form one cluster.
func startCluster(t *testing.T, configs string) []*brokerproc.Proc {
	t.Helper()
	raft, voters := brokerproc.RaftVoters(t, 3)
	procs := make([]*brokerproc.Proc, 3)
	for i := range procs {
		cfg := fmt.Sprintf("node_id: %d\nconfigs: {%s}\nmodules:\n  metadata: {use: raft, raft_listen: %q, voters: %s}\n",
			i+1, configs, raft[i], voters)
		procs[i] = brokerproc.StartNoWait(t, brokerproc.Options{Config: cfg})
	}
	for _, p := range procs {
		p.WaitReady()
	}
	return procs
}

// clusterValue sums a sample over the brokers' scrapes (a broker that does not
// answer counts nothing), and says how many brokers had it.
func clusterValue(procs []*brokerproc.Proc, name string, labels ...string) (sum float64, brokers int) {
	for _, p := range procs {
		s, err := metricstest.TryScrape(p.AdminAddr)
		if err != nil {
			continue
		}
		if v, ok := s.Value(name, labels...); ok {
			sum += v
			brokers++
		}
	}
	return sum, brokers
}

// Three broker processes: a group's lag reported once, by its coordinator; the
// controller's view (brokers, offline partitions, commit latency); and after a
// SIGKILL of one broker, under-replicated partitions, ISR shrinks, elections and a
// fenced broker.
func TestClusterMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("three broker processes")
	}
	procs := startCluster(t, `broker.session.timeout.ms: "3000", broker.heartbeat.interval.ms: "300", replica.lag.time.max.ms: "2000",`+
		` offsets.topic.replication.factor: "3", offsets.topic.num.partitions: "3", auto.create.topics.enable: "false"`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := procs[0].Admin(t)
	if _, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": ptr("2")}, "health"); err != nil {
		t.Fatal(err)
	}
	// thin has one replica per partition, spread over the brokers: the group's
	// coordinator holds at most one of them and asks the others' leaders.
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "thin"); err != nil {
		t.Fatal(err)
	}
	seeds := kgo.SeedBrokers(procs[0].Addr, procs[1].Addr, procs[2].Addr)
	cl := procs[0].Client(t, seeds, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, topic := range []string{"health", "thin"} {
		for p := range int32(3) {
			for i := range 10 {
				r := &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%d", i)}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	offs := map[int32]int64{0: 5, 1: 5, 2: 5}
	testbroker.RetryCoordinator(t, ctx, "commit", func() error {
		return commitErr(ctx, adm, "watchers", map[string]map[int32]int64{"health": offs, "thin": offs})
	})
	// A second group on thin at other offsets: its time lags need fetches of their own.
	testbroker.RetryCoordinator(t, ctx, "commit", func() error {
		return commitErr(ctx, adm, "watchers2", map[string]map[int32]int64{"thin": {0: 2, 1: 2, 2: 2}})
	})

	all := procs
	testbroker.WaitFor(t, 30*time.Second, "the group's lag from its coordinator alone, and a healthy cluster", func() string {
		lag, n := clusterValue(all, "sluice_consumer_group_lag", "group", "watchers", "topic", "health")
		// thin's partitions led elsewhere come from their leaders' high watermarks,
		// asked after a first scrape.
		thin, tn := clusterValue(all, "sluice_consumer_group_lag", "group", "watchers", "topic", "thin")
		if thin != 15 || tn != 1 {
			return fmt.Sprintf("thin's lag %v from %d brokers", thin, tn)
		}
		// and their time lags from the leaders' batch headers: every partition's.
		if n := lagSecondsSamples(all, "watchers", "thin"); n != 3 {
			return fmt.Sprintf("thin's time lag for %d partitions, want 3", n)
		}
		thin2, _ := clusterValue(all, "sluice_consumer_group_lag", "group", "watchers2", "topic", "thin")
		if n := lagSecondsSamples(all, "watchers2", "thin"); thin2 != 24 || n != 3 {
			return fmt.Sprintf("watchers2 on thin: lag %v, time lag for %d partitions", thin2, n)
		}
		under, _ := clusterValue(all, "sluice_under_replicated_partitions")
		active, _ := clusterValue(all, "sluice_brokers", "state", "active")
		ctl, _ := clusterValue(all, "sluice_metadata_is_controller")
		commits, _ := clusterValue(all, "sluice_metadata_commit_seconds")
		offline, _ := clusterValue(all, "sluice_offline_partitions")
		if lag != 15 || n != 1 || under != 0 || active != 3 || ctl != 1 || commits < 1 || offline != 0 {
			return fmt.Sprintf("lag %v from %d brokers, under-replicated %v, active brokers %v, controllers %v, commits %v, offline %v",
				lag, n, under, active, ctl, commits, offline)
		}
		return ""
	})
	// The console of any broker shows every partition's time lag, the ones led
	// elsewhere from their leaders.
	for _, p := range procs {
		var g struct {
			Partitions []struct {
				Topic      string   `json:"topic"`
				Lag        int64    `json:"lag"`
				LagSeconds *float64 `json:"lag_seconds"`
			} `json:"partitions"`
		}
		resp, err := http.Get("http://" + p.AdminAddr + "/v1/console/groups/watchers")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&g)
		resp.Body.Close()
		if err != nil || len(g.Partitions) != 6 {
			t.Fatalf("console of %s: %v %+v", p.Addr, err, g)
		}
		for _, row := range g.Partitions {
			if row.Lag != 5 || row.LagSeconds == nil || *row.LagSeconds <= 0 {
				t.Fatalf("console of %s: %+v", p.Addr, g.Partitions)
			}
		}
	}
	md, err := adm.Metadata(ctx, "health")
	if err != nil {
		t.Fatal(err)
	}
	led3 := 0
	for _, p := range md.Topics["health"].Partitions {
		if p.Leader == 3 {
			led3++
		}
	}
	electionsBefore, _ := clusterValue(all, "sluice_leader_elections_total")

	procs[2].Kill()
	survivors := procs[:2]
	testbroker.WaitFor(t, 60*time.Second, "every partition under-replicated, a fenced broker, ISR shrinks and elections", func() string {
		under, _ := clusterValue(survivors, "sluice_under_replicated_partitions")
		fenced, _ := clusterValue(survivors, "sluice_brokers", "state", "fenced")
		shrinks, _ := clusterValue(survivors, "sluice_isr_shrinks_total")
		elections, _ := clusterValue(survivors, "sluice_leader_elections_total")
		underMin, _ := clusterValue(survivors, "sluice_under_min_isr_partitions")
		// health's 3 partitions and __consumer_offsets' 3, all of replication factor 3.
		if under != 6 || fenced != 1 || shrinks < 1 || elections < electionsBefore+float64(led3) || underMin != 0 {
			return fmt.Sprintf("under-replicated %v, fenced %v, shrinks %v, elections %v (before %v, broker 3 led %d), under min ISR %v",
				under, fenced, shrinks, elections, electionsBefore, led3, underMin)
		}
		return ""
	})
	// The lag is still reported, by whichever broker coordinates the group now.
	testbroker.WaitFor(t, 30*time.Second, "the lag after the kill", func() string {
		if lag, n := clusterValue(survivors, "sluice_consumer_group_lag", "group", "watchers", "topic", "health"); lag != 15 || n != 1 {
			return fmt.Sprintf("lag %v from %d brokers", lag, n)
		}
		return ""
	})
}

func ptr(s string) *string { return &s }

// lagSecondsSamples counts the positive sluice_consumer_group_lag_seconds samples of
// group and topic over the brokers.
func lagSecondsSamples(procs []*brokerproc.Proc, group, topic string) int {
	n := 0
	for _, p := range procs {
		s, err := metricstest.TryScrape(p.AdminAddr)
		if err != nil {
			continue
		}
		for _, m := range s["sluice_consumer_group_lag_seconds"].GetMetric() {
			var g, tp string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "group":
					g = l.GetValue()
				case "topic":
					tp = l.GetValue()
				}
			}
			if g == group && tp == topic && m.GetGauge().GetValue() > 0 {
				n++
			}
		}
	}
	return n
}
