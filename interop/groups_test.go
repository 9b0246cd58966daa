package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupBrokerConfig is the broker config of the consumer group tests: no initial rebalance
// delay (a first join answers at once instead of after 3s) and a small __consumer_offsets.
const groupBrokerConfig = `configs: {group.initial.rebalance.delay.ms: "0", offsets.topic.num.partitions: "4"}
`

// startGroupBroker starts a broker on groupBrokerConfig with topic created (partitions
// partitions) and returns it with an admin client for it.
func startGroupBroker(t *testing.T, topic string, partitions int32) (*broker, *kadm.Client) {
	t.Helper()
	b := startBrokerConfig(t, groupBrokerConfig)
	createTopic(t, b.addr, topic, partitions)
	return b, kadm.NewClient(newClient(t, b.addr))
}

// lineProc is a client process the test talks to while it runs: lines to its stdin,
// JSON events (objects with an "event" field) from its stdout. Every line of its output
// goes to the test log when the test fails.
type lineProc struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *lineBuffer
	errb  *syncBuffer
	done  chan struct{}
	err   error
	next  int // index in out of the next line waitEvent looks at
}

// lineBuffer collects a process's stdout as lines and wakes waiters on each new one.
type lineBuffer struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	wake    chan struct{} // capacity 1
}

func (l *lineBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *lineBuffer) from(i int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i >= len(l.lines) {
		return nil
	}
	return append([]string(nil), l.lines[i:]...)
}

// startLineProc starts name args in this package's directory (env added to the test's
// environment); t.Cleanup kills it (and its process group) if it still runs.
func startLineProc(t *testing.T, env []string, name string, args ...string) *lineProc {
	t.Helper()
	p := &lineProc{
		t:    t,
		name: strings.TrimSpace(name + " " + strings.Join(args, " ")),
		out:  &lineBuffer{wake: make(chan struct{}, 1)},
		errb: &syncBuffer{},
		done: make(chan struct{}),
	}
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = procAttr()
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = p.out
	cmd.Stderr = p.errb
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("%s: stdin pipe: %v", p.name, err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	p.cmd, p.stdin = cmd, stdin
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			killGroup(cmd.Process.Pid)
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s (exit: %v):\nstdout:\n%s\nstderr:\n%s", p.name, p.err,
				tail(strings.Join(p.out.from(0), "\n"), 60), tail(p.errb.String(), 60))
		}
	})
	return p
}

// kill SIGKILLs the process (and its process group) and waits for it.
func (p *lineProc) kill() {
	p.t.Helper()
	killGroup(p.cmd.Process.Pid)
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.t.Fatalf("%s: still running 10s after SIGKILL", p.name)
	}
}

// send writes one line to the process's stdin.
func (p *lineProc) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("%s: write %q to stdin: %v", p.name, line, err)
	}
}

// waitEvent returns the next stdout event of the given kind (its JSON line), skipping
// other lines. A "fail" event, the process exiting or the timeout fail the test.
func (p *lineProc) waitEvent(kind string, timeout time.Duration) string {
	p.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		for _, line := range p.out.from(p.next) {
			p.next++
			var ev struct {
				Event string `json:"event"`
				Msg   string `json:"msg"`
			}
			if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &ev) != nil {
				continue
			}
			if ev.Event == "fail" {
				p.t.Fatalf("%s: FAIL: %s", p.name, ev.Msg)
			}
			if ev.Event == kind {
				return line
			}
		}
		select {
		case <-p.out.wake:
		case <-p.done:
			if len(p.out.from(p.next)) > 0 {
				continue
			}
			p.t.Fatalf("%s exited (%v) before its %q event", p.name, p.err, kind)
		case <-deadline.C:
			p.t.Fatalf("%s: no %q event within %s", p.name, kind, timeout)
		}
	}
}

// wait waits for the process to exit and fails the test unless it exits 0.
func (p *lineProc) wait(timeout time.Duration) {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("%s: still running after %s", p.name, timeout)
	}
	if p.err != nil {
		p.t.Fatalf("%s: %v", p.name, p.err)
	}
}

// stopReport sends "stop", decodes the "report" event the process answers with into rep
// and waits for it to exit 0.
func (p *lineProc) stopReport(rep any) {
	p.t.Helper()
	p.send("stop")
	if err := json.Unmarshal([]byte(p.waitEvent("report", 30*time.Second)), rep); err != nil {
		p.t.Fatalf("%s: report: %v", p.name, err)
	}
	p.wait(10 * time.Second)
}

// produceSeq writes n records to topic with franz-go, record i to partition i%partitions,
// value prefix-i, and returns the value of each (partition, offset).
func produceSeq(t *testing.T, addr, topic string, partitions int32, prefix string, n int) map[int32]map[int64]string {
	t.Helper()
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // kafkajs has no snappy
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(fmt.Sprintf("%s-%04d", prefix, i))}
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce %d records to %s: %v", n, topic, err)
	}
	out := map[int32]map[int64]string{}
	for _, r := range res {
		if out[r.Record.Partition] == nil {
			out[r.Record.Partition] = map[int64]string{}
		}
		out[r.Record.Partition][r.Record.Offset] = string(r.Record.Value)
	}
	cl.Close()
	return out
}

// answerErr returns a kadm answer with its error or, if there is none, the first error
// the answer holds (kadm reports per-group and per-partition errors there).
func answerErr[R interface{ Error() error }](r R, err error) (R, error) {
	if err == nil {
		err = r.Error()
	}
	return r, err
}

// endOffsets returns the end offset of every partition of topic.
func endOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := answerErr(adm.ListEndOffsets(ctx, topic))
	if err != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, err)
	}
	out := map[int32]int64{}
	for p, o := range ends[topic] {
		out[p] = o.Offset
	}
	return out
}

// committed returns the group's committed offsets for topic (partition → offset), or an
// error when OffsetFetch fails.
func committed(adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	os, err := answerErr(adm.FetchOffsets(ctx, group))
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range os[topic] {
		out[p] = o.At
	}
	return out, nil
}

// waitCommittedAtEnd polls OffsetFetch until the group's committed offsets for topic
// equal the end offsets, and fails the test with both when they do not within timeout.
func waitCommittedAtEnd(t *testing.T, adm *kadm.Client, group, topic string, timeout time.Duration) map[int32]int64 {
	t.Helper()
	ends := endOffsets(t, adm, topic)
	var got map[int32]int64
	var err error
	ok := pollUntil(timeout, func() bool {
		got, err = committed(adm, group, topic)
		return err == nil && mapsEqual(got, ends)
	})
	if !ok {
		t.Fatalf("group %s: committed offsets %v (err %v), want the end offsets %v (after %s)", group, got, err, ends, timeout)
	}
	return ends
}

// seqCounts returns how many records of recs (partition → offset → value) each partition
// holds: a group's lag before anyone consumes them.
func seqCounts(recs map[int32]map[int64]string) map[int32]int64 {
	out := map[int32]int64{}
	for p := range recs {
		out[p] = int64(len(recs[p]))
	}
	return out
}

// consumedRecord is one record a client consumed.
type consumedRecord struct {
	Consumer  int    `json:"c"`
	Partition int32  `json:"p"`
	Offset    int64  `json:"o"`
	Value     string `json:"v"`
}

// groupReport is the part of a consumer group script's "report" event every caller reads.
type groupReport struct {
	Records []consumedRecord `json:"records"`
}

// groupRun drives a client's consumer group script through the sequence TestKafkajsGroup
// and TestLibrdkafkaGroup share: two members consume and commit 300 records
// (twoConsumers), leave, and a fresh member resumes from the commits (resume).
type groupRun struct {
	t            *testing.T
	b            *broker
	adm          *kadm.Client
	topic, group string
	partitions   int32
	what         string   // names the run in messages
	clientIDs    []string // the two members' client ids, sorted
	// start starts the script with n records to consume in as many members as consumers.
	start func(n, consumers string) *lineProc
}

// twoConsumers creates the topic, writes 300 records over its partitions and runs two
// members until they have consumed them; while they run the group must be live with
// both (checkLiveGroup) and commit the end offsets. It stops them, decodes their report
// into rep and returns the records written and the end offsets.
func (g *groupRun) twoConsumers(rep any) (first map[int32]map[int64]string, ends map[int32]int64) {
	t := g.t
	t.Helper()
	createTopic(t, g.b.addr, g.topic, g.partitions)
	first = produceSeq(t, g.b.addr, g.topic, g.partitions, "first", 300)
	start := time.Now()
	p := g.start("300", "2")
	p.waitEvent("consumed", 45*time.Second)
	t.Logf("%s: two consumers consumed 300 records in %s", g.what, time.Since(start).Round(time.Millisecond))
	ends = waitCommittedAtEnd(t, g.adm, g.group, g.topic, 20*time.Second)
	checkLiveGroup(t, g.adm, g.group, g.topic, g.partitions, g.clientIDs)
	p.stopReport(rep)
	return first, ends
}

// resume checks what the members left behind and a fresh member's restart from it:
// leaving (LeaveGroup on close) keeps the commits (still ends), the group is Empty and
// lags by exactly the 60 records produced next, and one new member in the group gets
// only those 60, none twice, and commits them.
func (g *groupRun) resume(ends map[int32]int64) {
	t := g.t
	t.Helper()
	if got, err := committed(g.adm, g.group, g.topic); err != nil || !mapsEqual(got, ends) {
		t.Fatalf("%s: after the consumers left: committed %v (err %v), want %v", g.what, got, err, ends)
	}
	second := produceSeq(t, g.b.addr, g.topic, g.partitions, "second", 60)
	checkEmptyGroupLag(t, g.adm, g.group, g.topic, seqCounts(second))

	start := time.Now()
	p := g.start("60", "1")
	p.waitEvent("consumed", 30*time.Second)
	waitCommittedAtEnd(t, g.adm, g.group, g.topic, 20*time.Second)
	var rep groupReport
	p.stopReport(&rep)
	if dups := checkConsumed(t, g.what+" after restart", rep.Records, second); dups != 0 {
		t.Errorf("%s after restart: %d duplicates (single consumer, no rebalance)", g.what, dups)
	}
	t.Logf("%s: restarted consumer resumed at the committed offsets: %d records in %s", g.what, len(rep.Records), time.Since(start).Round(time.Millisecond))
}

// checkConsumed checks that recs hold every record of want (partition → offset → value)
// and nothing else, and returns how many were delivered more than once.
func checkConsumed(t *testing.T, what string, recs []consumedRecord, want map[int32]map[int64]string) (dups int) {
	t.Helper()
	seen := map[int32]map[int64]int{}
	bad := 0
	for _, r := range recs {
		v, ok := want[r.Partition][r.Offset]
		if !ok || v != r.Value {
			if bad++; bad <= 10 {
				t.Errorf("%s: consumed partition %d offset %d value %q, which is not one of the expected records (want %q)",
					what, r.Partition, r.Offset, r.Value, v)
			}
			continue
		}
		if seen[r.Partition] == nil {
			seen[r.Partition] = map[int64]int{}
		}
		seen[r.Partition][r.Offset]++
		if seen[r.Partition][r.Offset] > 1 {
			dups++
		}
	}
	missing := 0
	for p, offs := range want {
		for o := range offs {
			if seen[p][o] == 0 {
				if missing++; missing <= 10 {
					t.Errorf("%s: partition %d offset %d (%q) was never consumed", what, p, o, offs[o])
				}
			}
		}
	}
	if missing > 10 || bad > 10 {
		t.Errorf("%s: %d records missing, %d unexpected in all", what, missing, bad)
	}
	return dups
}

// describeGroup describes one group and fails the test on an error.
func describeGroup(t *testing.T, adm *kadm.Client, group string) kadm.DescribedGroup {
	t.Helper()
	d, err := describeGroupErr(adm, group)
	if err != nil {
		t.Fatalf("DescribeGroups %s: %v", group, err)
	}
	return d
}

// describeGroupErr describes one group. (DescribeGroups v6, KIP-1043, answers
// GROUP_ID_NOT_FOUND for a group that does not exist yet.)
func describeGroupErr(adm *kadm.Client, group string) (kadm.DescribedGroup, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := answerErr(adm.DescribeGroups(ctx, group))
	return ds[group], err
}

// memberPartitions returns a described member's assigned partitions of topic, sorted.
func memberPartitions(m kadm.DescribedGroupMember, topic string) []int32 {
	var out []int32
	if a, ok := m.Assigned.AsConsumer(); ok {
		for _, tp := range a.Topics {
			if tp.Topic == topic {
				out = append(out, tp.Partitions...)
			}
		}
	}
	slices.Sort(out)
	return out
}

// waitStableGroup polls DescribeGroups until the group is Stable with n members that
// each have some partitions of topic, together all of them exactly once; it returns the
// description.
func waitStableGroup(t *testing.T, adm *kadm.Client, group, topic string, partitions int32, n int, timeout time.Duration) kadm.DescribedGroup {
	t.Helper()
	var d kadm.DescribedGroup
	var err error
	ok := pollUntil(timeout, func() bool {
		d, err = describeGroupErr(adm, group)
		if err != nil || d.State != "Stable" || len(d.Members) != n {
			return false
		}
		var all []int32
		for _, m := range d.Members {
			ps := memberPartitions(m, topic)
			if len(ps) == 0 {
				return false
			}
			all = append(all, ps...)
		}
		slices.Sort(all)
		if len(all) != int(partitions) {
			return false
		}
		for i, p := range all {
			if p != int32(i) {
				return false
			}
		}
		return true
	})
	if !ok {
		var ms []string
		for _, m := range d.Members {
			ms = append(ms, fmt.Sprintf("%s(client %s) %v", m.MemberID, m.ClientID, memberPartitions(m, topic)))
		}
		t.Fatalf("group %s: state %q, protocol %q/%q, members %v (DescribeGroups error: %v); want Stable with %d members sharing the %d partitions of %s (after %s)",
			group, d.State, d.ProtocolType, d.Protocol, ms, err, n, partitions, topic, timeout)
	}
	return d
}

// checkLiveGroup checks ListGroups, DescribeGroups and Lag for a live group of n members
// that has consumed and committed everything: members with the client ids clientIDs
// (sorted), protocol type consumer, every partition assigned once, lag 0 everywhere with
// the partition's member attached.
func checkLiveGroup(t *testing.T, adm *kadm.Client, group, topic string, partitions int32, clientIDs []string) {
	t.Helper()
	d := waitStableGroup(t, adm, group, topic, partitions, len(clientIDs), 20*time.Second)
	if d.ProtocolType != "consumer" || d.Protocol == "" {
		t.Errorf("DescribeGroups %s: protocol type %q, protocol %q; want consumer and an assignor name", group, d.ProtocolType, d.Protocol)
	}
	var ids []string
	owner := map[int32]string{}
	for _, m := range d.Members {
		ids = append(ids, m.ClientID)
		if m.MemberID == "" || m.ClientHost == "" {
			t.Errorf("DescribeGroups %s: member %+v lacks a member id or client host", group, m)
		}
		if j, ok := m.Join.AsConsumer(); !ok || !slices.Contains(j.Topics, topic) {
			t.Errorf("DescribeGroups %s: member %s join metadata %+v does not subscribe to %s", group, m.MemberID, j, topic)
		}
		for _, p := range memberPartitions(m, topic) {
			owner[p] = m.MemberID
		}
	}
	sort.Strings(ids)
	if !slices.Equal(ids, clientIDs) {
		t.Errorf("DescribeGroups %s: member client ids %v, want %v", group, ids, clientIDs)
	}
	t.Logf("DescribeGroups %s: %s, protocol %s/%s, %d members", group, d.State, d.ProtocolType, d.Protocol, len(d.Members))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ls, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	if l, ok := ls[group]; !ok || l.State != "Stable" || l.ProtocolType != "consumer" || l.Coordinator != 1 {
		t.Errorf("ListGroups: %s is %+v (listed: %v); want state Stable, protocol type consumer, coordinator 1", group, l, ok)
	}

	l := groupLag(t, ctx, adm, group)
	for p := int32(0); p < partitions; p++ {
		ml, ok := l.Lag.Lookup(topic, p)
		switch {
		case !ok:
			t.Errorf("Lag %s: no lag for %s/%d", group, topic, p)
		case ml.Err != nil || ml.Lag != 0 || ml.Commit.At != ml.End.Offset:
			t.Errorf("Lag %s: %s/%d: lag %d, commit %d, end %d, err %v; want lag 0", group, topic, p, ml.Lag, ml.Commit.At, ml.End.Offset, ml.Err)
		case ml.Member == nil || ml.Member.MemberID != owner[p]:
			t.Errorf("Lag %s: %s/%d: member %+v, want %s (its assignee)", group, topic, p, ml.Member, owner[p])
		}
	}
}

// groupLag returns kadm's Lag of group, failing the test on an error in the request or
// in the group's answer.
func groupLag(t *testing.T, ctx context.Context, adm *kadm.Client, group string) kadm.DescribedGroupLag {
	t.Helper()
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		t.Fatalf("Lag %s: %v", group, err)
	}
	l := lags[group]
	if err := l.Error(); err != nil {
		t.Fatalf("Lag %s: %v", group, err)
	}
	return l
}

// checkEmptyGroupLag waits for the group to be Empty (every member left) and checks that
// Lag counts want records (partition → lag) that nobody has consumed yet.
func checkEmptyGroupLag(t *testing.T, adm *kadm.Client, group, topic string, want map[int32]int64) {
	t.Helper()
	var d kadm.DescribedGroup
	if !pollUntil(20*time.Second, func() bool { d = describeGroup(t, adm, group); return d.State == "Empty" }) {
		t.Fatalf("group %s: state %q with %d members after every consumer closed, want Empty", group, d.State, len(d.Members))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := groupLag(t, ctx, adm, group)
	if l.State != "Empty" {
		t.Errorf("Lag %s: state %q, want Empty", group, l.State)
	}
	var total, wantTotal int64
	for p, n := range want {
		wantTotal += n
		ml, ok := l.Lag.Lookup(topic, p)
		if !ok || ml.Err != nil || ml.Lag != n || ml.Member != nil {
			t.Errorf("Lag %s (Empty): %s/%d: %+v (found %v), want lag %d and no member", group, topic, p, ml, ok, n)
		}
	}
	if total = l.Lag.Total(); total != wantTotal {
		t.Errorf("Lag %s (Empty): total %d, want %d", group, total, wantTotal)
	}
}

func mapsEqual(a, b map[int32]int64) bool { return maps.Equal(a, b) }
