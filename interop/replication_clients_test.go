package interop

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReplicationClientsBrokerKills is TestReplicationDurability for the other clients:
// librdkafka (replication_librdkafka_test.py) and kafkajs (replication_kafkajs_test.js)
// idempotent acks=all producers keep producing numbered records to a topic of 3
// partitions (RF 3, min.insync.replicas 2), bootstrapped with all three brokers, while
// a random broker is SIGKILLed three times. After each kill the test waits until the
// others have the broker out of every ISR, restarts it, and waits until every ISR is
// whole and the client has delivered more records to every partition. Then the client
// flushes and reports every delivery: none may have failed, every delivered record
// must be stored exactly once at the offset its delivery report gave, in sequence order
// (the partition holds nothing else), and the three replicas must hold the same batches.
func TestReplicationClientsBrokerKills(t *testing.T) {
	t.Parallel()
	t.Run("librdkafka", func(t *testing.T) {
		needLibrdkafka(t)
		replClientKills(t, "lrk", func(seeds, topic string, partitions int32) *lineProc {
			return startPython(t, "replication_librdkafka_test.py", seeds, topic, strconv.Itoa(int(partitions)), "lrk")
		})
	})
	t.Run("kafkajs", func(t *testing.T) {
		node := needKafkajs(t)
		replClientKills(t, "kjs", func(seeds, topic string, partitions int32) *lineProc {
			return startNode(t, node, "replication_kafkajs_test.js", seeds, topic, strconv.Itoa(int(partitions)), "kjs")
		})
	})
}

// replClientsRF is the replication factor of TestReplicationClientsBrokerKills' topics
// (1 checks the harness on a tree without ISR replication: the ISR conditions and the
// replica comparison are then left out).
const replClientsRF = 3

// replClientEvent is a line the client scripts print: progress events and the final
// report.
type replClientEvent struct {
	Event      string          `json:"event"`
	Msg        string          `json:"msg"`
	Delivered  json.RawMessage `json:"delivered"` // a count in progress events, the records in the report
	Failed     json.RawMessage `json:"failed"`
	Partitions []int64         `json:"partitions"` // progress: delivered per partition
	Sent       []int64         `json:"sent"`       // report: records produced per partition
	Left       int             `json:"undelivered"`
	Errors     int             `json:"errors"`  // report: errors the client logged or reported
	Retries    int             `json:"retries"` // report: librdkafka: records sent again; kafkajs: sends retried
}

// replClientProgress follows a client script's progress events.
type replClientProgress struct {
	p    *lineProc
	next int     // the next line of p's stdout to look at
	per  []int64 // the latest delivered count per partition
}

// update reads the lines printed since the last call; a "fail" event or the process
// exiting fails the test.
func (r *replClientProgress) update() {
	t := r.p.t
	t.Helper()
	for _, line := range r.p.out.from(r.next) {
		r.next++
		var ev replClientEvent
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		switch ev.Event {
		case "fail":
			t.Fatalf("%s: FAIL: %s", r.p.name, ev.Msg)
		case "progress":
			r.per = ev.Partitions
		}
	}
	select {
	case <-r.p.done:
		t.Fatalf("%s exited (%v) while producing", r.p.name, r.p.err)
	default:
	}
}

// total is the number of delivered records the last progress event counted.
func (r *replClientProgress) total() int64 {
	var n int64
	for _, d := range r.per {
		n += d
	}
	return n
}

// waitEach waits until every partition has more than floor delivered records.
func (r *replClientProgress) waitEach(timeout time.Duration, floor []int64, what string) {
	r.p.t.Helper()
	ok := pollUntil(timeout, func() bool {
		r.update()
		if len(r.per) != len(floor) {
			return false
		}
		for i, d := range r.per {
			if d <= floor[i] {
				return false
			}
		}
		return true
	})
	if !ok {
		r.p.t.Fatalf("%s: %s: no delivery to every partition within %s (delivered %v, before %v)", r.p.name, what, timeout, r.per, floor)
	}
}

// replClientKills runs one client of TestReplicationClientsBrokerKills: start(seeds,
// topic, partitions) starts its script.
func replClientKills(t *testing.T, tag string, start func(seeds, topic string, partitions int32) *lineProc) {
	const partitions = 3
	// Two kills in CI; the long form (SLUICE_DURABILITY set, see
	// TestReplicationDurability) kills six times.
	kills := 2
	if os.Getenv("SLUICE_DURABILITY") != "" {
		kills = 6
	}
	topic := "repl-" + tag
	began := time.Now()
	c := newReplCluster(t, nil)
	c.node(1).mustCreateTopic(30*time.Second, topic, partitions, replClientsRF,
		map[string]string{"min.insync.replicas": strconv.Itoa(min(2, replClientsRF))})
	whole := func(ps map[int32]partState) bool {
		if replClientsRF == len(allThree) {
			return fullISR(allThree)(ps)
		}
		for _, p := range ps {
			if p.leader < 0 || len(p.isr) != replClientsRF {
				return false
			}
		}
		return len(ps) == partitions
	}
	c.node(1).waitPartitions(30*time.Second, topic, "every ISR whole", whole)
	t.Logf("cluster up and topic %s created in %s", topic, time.Since(began).Round(time.Millisecond))

	p := start(strings.Join(c.seeds(), ","), topic, partitions)
	p.waitEvent("ready", 30*time.Second)
	prog := &replClientProgress{p: p}
	prog.waitEach(30*time.Second, make([]int64, partitions), "before the first kill")

	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 8))
	t.Logf("victims drawn with seed %d", seed)
	for k := 1; k <= kills; k++ {
		victim := c.nodes[rng.IntN(len(c.nodes))]
		prog.update()
		victim.kill()
		killed := time.Now()
		t.Logf("kill %d: broker %d (SIGKILL) after %d delivered records (%s)", k, victim.id, prog.total(), time.Since(began).Round(time.Millisecond))
		other := c.others(victim)[0]
		other.waitPartitions(30*time.Second, topic, fmt.Sprintf("broker %d out of every ISR", victim.id), func(ps map[int32]partState) bool {
			for _, p := range ps {
				if p.leader == victim.id || (replClientsRF > 1 && slices.Contains(p.isr, victim.id)) {
					return false
				}
			}
			return len(ps) == partitions
		})
		out := time.Now()
		victim.restart()
		restarted := time.Now()
		other.waitPartitions(60*time.Second, topic, "every ISR whole again", whole)
		isrWhole := time.Now()
		prog.update()
		prog.waitEach(30*time.Second, slices.Clone(prog.per), fmt.Sprintf("after kill %d", k))
		t.Logf("kill %d: out of every ISR after %s, restarted in %s, ISR whole %s later, progress on every partition %s later",
			k, out.Sub(killed).Round(time.Millisecond), restarted.Sub(out).Round(time.Millisecond),
			isrWhole.Sub(restarted).Round(time.Millisecond), time.Since(isrWhole).Round(time.Millisecond))
	}
	prog.update()
	t.Logf("%d kills done after %s; %d records delivered; flushing", kills, time.Since(began).Round(time.Millisecond), prog.total())

	_ = p.stdin.Close()
	line := p.waitEvent("report", 150*time.Second)
	p.wait(30 * time.Second)
	var rep replClientEvent
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		t.Fatalf("%s: bad report: %v", p.name, err)
	}
	var delivered, failed [][3]any
	if err := json.Unmarshal(rep.Delivered, &delivered); err != nil {
		t.Fatalf("%s: bad delivered records in the report: %v", p.name, err)
	}
	if err := json.Unmarshal(rep.Failed, &failed); err != nil {
		t.Fatalf("%s: bad failed records in the report: %v", p.name, err)
	}
	if len(failed) > 0 || rep.Left > 0 {
		t.Errorf("%s: %d records failed (first: %v), %d undelivered: an idempotent acks=all producer with unlimited retries loses none",
			p.name, len(failed), failed[0:min(1, len(failed))], rep.Left)
	}
	if len(rep.Sent) != partitions {
		t.Fatalf("%s: report counts records sent to %d partitions, want %d", p.name, len(rep.Sent), partitions)
	}

	// want[p][offset] is the value the client was told is there.
	want := make([]map[int64]string, partitions)
	for i := range want {
		want[i] = map[int64]string{}
	}
	for _, d := range delivered {
		part, off, v := int32(d[0].(float64)), int64(d[1].(float64)), d[2].(string)
		if part < 0 || part >= partitions {
			t.Fatalf("%s: a delivery to partition %d", p.name, part)
		}
		if prev, ok := want[part][off]; ok {
			t.Errorf("partition %d offset %d reported delivered twice: %q and %q", part, off, prev, v)
		}
		want[part][off] = v
	}
	total := 0
	for part := range int32(partitions) {
		vals := readValues(t, c.node(1).addr, topic, part)
		total += len(vals)
		if int64(len(vals)) != rep.Sent[part] || int64(len(want[part])) != rep.Sent[part] {
			t.Errorf("partition %d: %d records stored, %d sent, %d delivered", part, len(vals), rep.Sent[part], len(want[part]))
		}
		bad := 0
		report := func(format string, args ...any) {
			bad++
			if bad <= 5 {
				t.Errorf(format, args...)
			}
		}
		seen := map[string]int64{}
		for off, v := range vals {
			if prev, ok := seen[v]; ok {
				report("partition %d: %q stored twice, at offsets %d and %d", part, v, prev, off)
			}
			seen[v] = int64(off)
			if w := string(seqValue(tag, part, int64(off))); v != w {
				report("partition %d offset %d: %q, want %q (lost, duplicated or reordered)", part, off, v, w)
			}
		}
		for off, v := range want[part] {
			if off >= int64(len(vals)) || vals[off] != v {
				got := "nothing"
				if off < int64(len(vals)) {
					got = strconv.Quote(vals[off])
				}
				report("partition %d offset %d: the client was told %q is there; it holds %s", part, off, v, got)
			}
		}
	}
	if replClientsRF == len(allThree) {
		batches := c.waitReplicasIdentical(60*time.Second, topic, partitions)
		for part, bs := range batches {
			if len(bs) == 0 || bs[len(bs)-1].last+1 != rep.Sent[part] {
				t.Errorf("partition %d: replicas end at %v, %d records were sent", part, lastOf(bs), rep.Sent[part])
			}
		}
	}
	t.Logf("%s: %d kills, %d records delivered (the client saw %d errors and retried %d: records sent again (librdkafka) or sends (kafkajs)), stored once each and in order (RF %d) in %s",
		tag, kills, total, rep.Errors, rep.Retries, replClientsRF, time.Since(began).Round(time.Millisecond))
}
