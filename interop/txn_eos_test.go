package interop

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	eospipeOnce sync.Once
	eospipeBin  string
	eospipeErr  error
)

// eospipe returns the path of interop/internal/eospipe built once per test binary, next
// to the broker binary (TestMain's cleanup removes it).
func eospipe(t *testing.T) string {
	t.Helper()
	needBroker(t)
	eospipeOnce.Do(func() {
		bin := filepath.Join(filepath.Dir(brokerBin), "eospipe")
		cmd := exec.Command("go", "build", "-o", bin, "./interop/internal/eospipe")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			eospipeErr = fmt.Errorf("go build ./interop/internal/eospipe: %w\n%s", err, out)
			return
		}
		eospipeBin = bin
	})
	if eospipeErr != nil {
		t.Fatal(eospipeErr)
	}
	return eospipeBin
}

// eosRun is one exactly-once pipeline test: N numbered input records, the pipeline
// (eospipe) restarted whenever it dies, and the output checked with read_committed.
type eosRun struct {
	t          *testing.T
	b          *broker
	in, out    string
	group      string
	partitions int32
	n          int
	adm        *kadm.Client
	pipe       *lineProc
	starts     int
	unexpected int // pipeline exits the test did not cause
	began      time.Time
	launch     func(r *eosRun) *lineProc
}

// since is the time since the input was written, for the log.
func (r *eosRun) since() time.Duration { return time.Since(r.began).Round(time.Millisecond) }

const eosMaxStarts = 30 // pipeline starts before the test gives up

// newEOSRun starts a broker and writes n input records ("in-%04d", record i to
// partition i%3) in produce requests of at most chunk records (0: one request).
// launch starts one pipeline process.
func newEOSRun(t *testing.T, name string, n, chunk int, launch func(r *eosRun) *lineProc) *eosRun {
	b := startBrokerConfig(t, txnBrokerConfig)
	r := &eosRun{t: t, b: b, in: name + "-in", out: name + "-out", group: name + "-g", partitions: 3, n: n, launch: launch}
	createTopic(t, b.addr, r.in, r.partitions)
	createTopic(t, b.addr, r.out, r.partitions)
	if chunk == 0 {
		produceSeq(t, b.addr, r.in, r.partitions, "in", r.n)
	} else {
		cl := newClient(t, b.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for from := 0; from < n; from += chunk {
			var recs []*kgo.Record
			for i := from; i < min(from+chunk, n); i++ {
				recs = append(recs, &kgo.Record{Topic: r.in, Partition: int32(i) % r.partitions, Value: []byte(fmt.Sprintf("in-%04d", i))})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce the input: %v", err)
			}
		}
	}
	r.adm = kadm.NewClient(newClient(t, b.addr))
	r.began = time.Now()
	return r
}

// launchEOSPipe starts interop/internal/eospipe (transactional id and group instance id
// stay the same across starts).
func launchEOSPipe(r *eosRun) *lineProc {
	return startLineProc(r.t, nil, eospipe(r.t), "-brokers", r.b.addr, "-group", r.group, "-in", r.in, "-out", r.out,
		"-txn-id", r.group+"-txn", "-chunk", "60", "-pace", "20ms")
}

// start starts the pipeline.
func (r *eosRun) start() {
	r.t.Helper()
	if r.starts >= eosMaxStarts {
		r.t.Fatalf("the pipeline was started %d times (%d exits the test did not cause); giving up", r.starts, r.unexpected)
	}
	r.starts++
	r.pipe = r.launch(r)
}

func (r *eosRun) pipeRunning() bool {
	select {
	case <-r.pipe.done:
		return false
	default:
		return true
	}
}

// progress returns how many input records the group has committed, or -1 on an error.
func (r *eosRun) progress() int {
	got, err := committed(r.adm, r.group, r.in)
	if err != nil {
		return -1
	}
	n := int64(0)
	for _, o := range got {
		n += o
	}
	return int(n)
}

// waitProgress waits until the group has committed at least target input records,
// restarting the pipeline whenever it exits on its own.
func (r *eosRun) waitProgress(target int, timeout time.Duration) {
	r.t.Helper()
	last := -1
	ok := pollUntil(timeout, func() bool {
		if !r.pipeRunning() {
			r.unexpected++
			r.t.Logf("%s: pipeline start %d exited on its own (%v); starting it again; stderr:\n%s",
				r.since(), r.starts, r.pipe.err, tail(r.pipe.errb.String(), 10))
			r.start()
		}
		last = r.progress()
		return last >= target
	})
	if !ok {
		r.t.Fatalf("the group committed %d input records within %s, want at least %d", last, timeout, target)
	}
}

// finish waits for the whole input to be committed, stops the pipeline cleanly and
// checks the output with read_committed: each input record's output exactly once, in
// the input's partition and order.
func (r *eosRun) finish() {
	r.t.Helper()
	r.waitProgress(r.n, 120*time.Second)
	if got := r.progress(); got != r.n {
		r.t.Errorf("the group committed %d input records, want exactly %d", got, r.n)
	}
	_ = r.pipe.stdin.Close()
	r.pipe.wait(60 * time.Second)

	writeSentinels(r.t, r.b.addr, r.out, int(r.partitions))
	got := readToSentinels(r.t, r.b.addr, r.out, int(r.partitions), kgo.ReadCommitted(), 60*time.Second)
	want := map[int32][]string{}
	for i := range r.n {
		p := int32(i) % r.partitions
		want[p] = append(want[p], fmt.Sprintf("out-in-%04d", i))
	}
	checkSamePartitionValues(r.t, "output read with read_committed", valuesPerPartition(got), want)
	all := readToSentinels(r.t, r.b.addr, r.out, int(r.partitions), kgo.ReadUncommitted(), 60*time.Second)
	total := 0
	for _, rs := range all {
		total += len(rs)
	}
	if total < r.n {
		r.t.Errorf("read_uncommitted sees %d output records, fewer than the %d committed ones", total, r.n)
	}
	r.t.Logf("%s: %d pipeline starts (%d exits not caused by the test); output: %d records committed, %d written in all (the rest aborted)",
		r.since(), r.starts, r.unexpected, r.n, total)
}

// TestEOSPipelineClientKills runs a franz-go GroupTransactSession consume-transform-
// produce pipeline (interop/internal/eospipe, a separate process) over 3000 numbered
// records, 60 per transaction with each transaction held open 20ms, SIGKILLs the
// pipeline process three times mid-stream (at a quarter, half and three quarters of the
// input committed) and starts it again with the same transactional id. The output, read
// with read_committed, must hold each input record's output exactly once: the killed
// pipeline's open transaction is aborted when its successor initialises, and the
// successor resumes from the offsets committed in the last committed transaction.
func TestEOSPipelineClientKills(t *testing.T) {
	t.Parallel()
	runEOSPipeKills(t, "eos-client-kills", "pipeline", func(r *eosRun) {
		r.pipe.kill()
		r.start()
	})
}

// TestEOSPipelineBrokerKills is TestEOSPipelineClientKills with the broker SIGKILLed
// (and restarted on its data dir) three times instead of the client: the pipeline keeps
// running, or exits with an error and is started again, and the transaction
// coordinator, the group coordinator and the partitions must recover in-flight
// transactions so that the output still holds each input record's output exactly once.
func TestEOSPipelineBrokerKills(t *testing.T) {
	t.Parallel()
	runEOSPipeKills(t, "eos-broker-kills", "broker", func(r *eosRun) {
		r.b.kill()
		r.b.start()
	})
}

// runEOSPipeKills runs the eospipe pipeline over 3000 records, 60 per transaction, and
// calls kill (which SIGKILLs what the log calls victim) at a quarter, half and three
// quarters of the input committed; then it checks the output (finish).
func runEOSPipeKills(t *testing.T, name, victim string, kill func(r *eosRun)) {
	t.Helper()
	r := newEOSRun(t, name, 3000, 0, launchEOSPipe)
	r.start()
	for k := 1; k <= 3; k++ {
		r.waitProgress(k*r.n/4, 90*time.Second)
		t.Logf("%s: SIGKILLing the %s at %d committed input records", r.since(), victim, r.progress())
		kill(r)
	}
	r.finish()
}

// TestKafkajsEOSKills runs txn_kafkajs_eos_test.js, a kafkajs pipeline made of the seed's
// transaction snippet (a group consumer's eachBatch doing tx.send + tx.sendOffsets +
// tx.commit), over 900 input records written in small batches, and SIGKILLs the node
// process at a quarter of the input, the broker at half, and the node process again at
// three quarters (the pipeline exits on any failure and is started again). The output,
// read with read_committed, must hold each input record's output exactly once.
func TestKafkajsEOSKills(t *testing.T) {
	t.Parallel()
	node := needKafkajs(t)
	r := newEOSRun(t, "kjs-eos", 900, 10, func(r *eosRun) *lineProc {
		return startNode(r.t, node, "txn_kafkajs_eos_test.js", r.b.addr, r.group, r.in, r.out, r.group+"-txn")
	})
	r.start()
	for k, what := range []string{"node", "broker", "node"} {
		r.waitProgress((k+1)*r.n/4, 90*time.Second)
		t.Logf("%s: SIGKILLing the %s at %d committed input records", r.since(), what, r.progress())
		if what == "broker" {
			r.b.kill()
			r.b.start()
		} else {
			r.pipe.kill()
			r.start()
		}
	}
	r.finish()
}
