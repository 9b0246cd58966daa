//go:build linux

package scaletest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/brokerproc"
)

// failoverShape is one run of TestClusterControllerFailover: topics of perTopic
// partitions, each on all three brokers.
type failoverShape struct {
	topics, perTopic int
	noFile           uint64
	configs          string // the brokers' extra configs, YAML map entries
}

func clusterFailoverShape() failoverShape {
	if brokerproc.Full() {
		// The goal: a 3-broker cluster with 100,000 partitions fails over
		// its controller without stalls. RF 3: every broker holds every partition.
		return failoverShape{topics: 100, perTopic: 1000, noFile: 20000, configs: `sluice.memory.limit.bytes: "1073741824"`}
	}
	return failoverShape{topics: 2, perTopic: 250, noFile: 1024}
}

// TestClusterControllerFailover starts three brokers (all raft voters), creates
// partitions on all three, writes one record to each with acks=all, SIGKILLs the
// active controller and times what a cluster must do next: a new controller, the dead
// broker fenced and out of every ISR, a live leader for every partition, a second
// record written to each through the survivors; then the killed broker's restart and
// its return to every ISR. No acknowledged record may be lost or duplicated (every
// partition ends at offset 2). The figures go to docs/BENCHMARKS.md.
func TestClusterControllerFailover(t *testing.T) {
	s := clusterFailoverShape()
	total := s.topics * s.perTopic
	const sessionTimeout = 6 * time.Second
	raftAddrs, voters := brokerproc.RaftVoters(t, 3)
	procs := make([]*brokerproc.Proc, 3)
	for i := range procs {
		cfg := fmt.Sprintf(`node_id: %d
admin_pprof: true
configs:
  broker.session.timeout.ms: "%d"
  broker.heartbeat.interval.ms: "500"
  %s
modules:
  metadata:
    use: raft
    raft_listen: %q
    voters: %s
`, i+1, sessionTimeout.Milliseconds(), s.configs, raftAddrs[i], voters)
		procs[i] = brokerproc.StartNoWait(t, brokerproc.Options{Config: cfg, NoFile: s.noFile,
			ReadyTimeout: 3 * time.Minute, StopTimeout: 3 * time.Minute})
	}
	for _, p := range procs {
		p.WaitReady() // voters become ready together, once they have a quorum
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	client := func(ps []*brokerproc.Proc, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		var seeds []string
		for _, p := range ps {
			seeds = append(seeds, p.Addr)
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("scaletest-failover")}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	admcl := client(procs)
	adm := kadm.NewClient(admcl)

	names := make([]string, s.topics)
	for i := range names {
		names[i] = fmt.Sprintf("failover-%03d", i)
	}
	created := createTopics(ctx, t, adm, int32(s.perTopic), 3, names)
	inSync := waitPartitions(ctx, t, admcl, names, total, "every ISR full", func(p kmsg.MetadataResponseTopicPartition) bool {
		return p.Leader >= 0 && len(p.ISR) == 3
	})
	records := func(round string) []*kgo.Record {
		recs := make([]*kgo.Record, 0, total)
		for _, name := range names {
			for part := range s.perTopic {
				recs = append(recs, &kgo.Record{Topic: name, Partition: int32(part), Value: fmt.Appendf(nil, "%s-%s-%d", round, name, part)})
			}
		}
		return recs
	}
	producer := func(ps []*brokerproc.Proc) *kgo.Client {
		return client(ps, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(s.perTopic*4),
			kgo.RequestTimeoutOverhead(time.Minute), kgo.RecordDeliveryTimeout(10*time.Minute))
	}
	firstWrite := produceEach(ctx, t, producer(procs), "first write", records("a"))

	dead := agreedController(ctx, procs)
	if dead < 1 || dead > 3 {
		t.Fatalf("controller %d, want one of the brokers 1-3", dead)
	}
	var survivors []*brokerproc.Proc
	for i, p := range procs {
		if int32(i+1) != dead {
			survivors = append(survivors, p)
		}
	}
	scl := client(survivors)
	procs[dead-1].Kill()
	killed := time.Now()

	var newController int32 = -1
	poll(ctx, t, "a new controller both survivors name", func() bool {
		newController = agreedController(ctx, survivors)
		return newController >= 1 && newController != dead
	})
	elected := time.Since(killed)
	fenced := waitPartitions(ctx, t, scl, names, total, "a live leader and the killed broker out of the ISR", func(p kmsg.MetadataResponseTopicPartition) bool {
		return p.Leader >= 0 && p.Leader != dead && !slices.Contains(p.ISR, dead)
	})
	failedOver := time.Since(killed)
	secondWrite := produceEach(ctx, t, producer(survivors), "write after the failover", records("b"))

	restartBegin := time.Now()
	procs[dead-1].Restart(t) // not running: starts it again on its data dir and ports
	restarted := time.Since(restartBegin)
	rejoined := waitPartitions(ctx, t, admcl, names, total, "the restarted broker back in every ISR", func(p kmsg.MetadataResponseTopicPartition) bool {
		return p.Leader >= 0 && len(p.ISR) == 3
	})

	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		t.Fatalf("ListEndOffsets: %v", err)
	}
	n := 0
	ends.Each(func(o kadm.ListedOffset) {
		n++
		if o.Err != nil || o.Offset != 2 {
			t.Errorf("end offset %s/%d = %d (%v), want 2: an acknowledged record lost or duplicated", o.Topic, o.Partition, o.Offset, o.Err)
		}
	})
	if n != total {
		t.Fatalf("end offsets for %d partitions, want %d", n, total)
	}
	var fds, peaks []string
	for i, p := range procs {
		fds = append(fds, fmt.Sprint(p.FDs()))
		peaks = append(peaks, fmt.Sprint(p.PeakRSS()>>20))
		if p.FDs() >= int(s.noFile) {
			t.Errorf("broker %d holds %d descriptors, limit %d", i+1, p.FDs(), s.noFile)
		}
	}
	t.Logf("%d partitions x RF 3 (%d topics x %d), nofile %d, session timeout %v: create %v, ISRs full %v, first write %v; "+
		"controller %d killed: controller %d elected after %v, leaders moved and ISRs shrunk after %v (%v of it polling partitions), write %v; "+
		"restart to ready %v, back in every ISR %v; fds %s, peak RSS %s MiB (the restarted broker's since its restart)",
		total, s.topics, s.perTopic, s.noFile, sessionTimeout, created.Round(time.Millisecond), inSync.Round(time.Millisecond), firstWrite.Round(time.Millisecond),
		dead, newController, elected.Round(time.Millisecond), failedOver.Round(time.Millisecond), fenced.Round(time.Millisecond), secondWrite.Round(time.Millisecond),
		restarted.Round(time.Millisecond), rejoined.Round(time.Millisecond), strings.Join(fds, "/"), strings.Join(peaks, "/"))
}

// poll calls cond every 100 ms until it holds, failing the test when ctx ends first.
func poll(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// agreedController is the controller every one of ps names in its own DescribeCluster
// answer, or -1 while they disagree or one does not answer. Each broker is asked
// directly: kadm's BrokerMetadata answers from the client's cache, whose controller
// is refreshed only with the client's metadata (every 5 minutes when idle).
func agreedController(ctx context.Context, ps []*brokerproc.Proc) int32 {
	var agreed int32 = -1
	for i, p := range ps {
		id := describeController(ctx, p.Addr)
		if id < 0 || (i > 0 && id != agreed) {
			return -1
		}
		agreed = id
	}
	return agreed
}

// describeController asks the broker at addr, and only it, for the controller.
func describeController(ctx context.Context, addr string) int32 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("scaletest-failover"), kgo.RequestRetries(0))
	if err != nil {
		return -1
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(rctx, kmsg.NewPtrDescribeClusterRequest())
	if err != nil || resp.(*kmsg.DescribeClusterResponse).ErrorCode != 0 {
		return -1
	}
	return resp.(*kmsg.DescribeClusterResponse).ControllerID
}

// waitPartitions polls the metadata of names until every one of total partitions
// satisfies ok, and returns how long that took. Each poll is a Metadata request
// (kgo hands it to a broker; kadm.Metadata would answer from the client's cache).
func waitPartitions(ctx context.Context, t *testing.T, cl *kgo.Client, names []string, total int, what string, ok func(kmsg.MetadataResponseTopicPartition) bool) time.Duration {
	t.Helper()
	begin := time.Now()
	last := "no metadata yet"
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	for {
		md, err := req.RequestWith(ctx, cl)
		if err == nil {
			n, bad := 0, 0
			var example string
			for _, td := range md.Topics {
				for _, p := range td.Partitions {
					n++
					if td.ErrorCode != 0 || p.ErrorCode != 0 || !ok(p) {
						if bad++; example == "" {
							example = fmt.Sprintf("%s/%d leader %d ISR %v error codes %d/%d", *td.Topic, p.Partition, p.Leader, p.ISR, td.ErrorCode, p.ErrorCode)
						}
					}
				}
			}
			if n == total && bad == 0 {
				return time.Since(begin)
			}
			last = fmt.Sprintf("%d of %d partitions listed, %d not yet, e.g. %s", n, total, bad, example)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %s", what, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
