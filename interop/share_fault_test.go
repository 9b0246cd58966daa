package interop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share groups (KIP-932) across broker SIGKILLs: a paced producer, three kgo share
// consumers accepting every record, and the broker (or, in a cluster, the leader of
// most partitions and then the group's coordinator) killed mid-stream, with records
// in flight. Every accept a consumer sends ends in one of three outcomes, told apart
// as below:
//
//   - confirmed: the broker answered it without error. It is durable (the broker
//     wrote the share state before answering), so a record is never accepted with
//     confirmation twice, and never handed out again after its accept was confirmed.
//   - refused: the broker answered it with a Kafka error code that says it was not
//     applied (or kgo dropped it on the broker's behalf: kgo reports acks of a reset
//     share session as INVALID_SHARE_SESSION_EPOCH without sending them). A refused
//     acknowledgement changes nothing, so the record is delivered again: a record
//     whose last accept was refused and that is never delivered again is an error.
//     Codes that leave the outcome open (ambiguousAckError: a state write the leader
//     could not confirm, records no longer held) count as unknown.
//   - unknown: no answer (the connection died, the broker was unreachable). The
//     broker may have applied it; such a record may or may not come back. The
//     consumers make one attempt per request (RequestRetries(0)): kgo would
//     otherwise resend a ShareAcknowledge whose connection broke, and the retry's
//     refusal would hide that the first attempt may have been applied.
//
// Every record the producer got acknowledged must end confirmed, or with an unknown
// last accept; then the group's share-partition start offsets must reach the end of
// the log (DescribeShareGroupOffsets): every record acknowledged, durably.
//
// How an accept's outcome is told. kgo's ShareAckCallback reports one result per
// partition and acknowledge request (ShareAckResult: topic, partition, Err), not the
// offsets it covered; the offsets of a request are whatever the client's source loop
// drained from the partition's pending acks when it built that request (a standalone
// ShareAcknowledge, or acks piggybacked on a ShareFetch). So each consumer works in
// windows: it polls, accepts every polled record in ONE call, MarkAcks(AckAccept,
// records...), then calls FlushAcks until it returns nil, and looks at the callback
// results that arrived meanwhile.
//
//   - MarkAcks, not a Record.Ack per record: MarkAcks appends all of a partition's
//     acks to its cursor under one lock (enqueueAllAcks), so the source loop drains
//     them into a single request. With Record.Ack one at a time, a ShareFetch the
//     source loop sends concurrently can piggyback some of a partition's acks and the
//     flush carry the rest: two results for one partition, and when one fails (a kill
//     between the two) there is no telling which records it covered. The accept sent
//     is the same either way.
//   - FlushAcks returns nil only once the client's pending-ack count is back to zero,
//     and kgo subtracts a request's acks from that count after the callback for the
//     request has returned. A retriable partition error puts the acks back on the
//     cursor without a callback (they are sent again, still within the window);
//     everything else is reported with an Err. So when FlushAcks returns, every
//     accept of the window has been reported exactly once, and the results of a
//     partition in the window are the outcome of its records' accepts.
//   - All results of the partition nil: confirmed. All of them *kerr.Error: refused.
//     Anything else (another error, no result, or nil mixed with errors, which the
//     above rules out) counts as unknown, never as confirmed.
//
// "Handed out again after its accept was confirmed" is judged with one event counter
// shared by the callbacks and a HookFetchRecordBuffered hook (which runs when kgo
// buffers a ShareFetch response's records, before the user polls them): a delivery
// buffered after a confirmation of the same record must have been acquired after the
// broker had it acknowledged. (The only honest exception would be a response that
// spent longer in flight than the whole acquisition lock, 5s, before the other
// consumer acquired, accepted and got the confirmation.)

// shareFaultBrokerConfig: no rebalance delay, few __consumer_offsets partitions, and
// share members heartbeating every second, so they rejoin quickly after a kill (share
// group membership is not persisted: members rejoin after a coordinator restart).
const shareFaultBrokerConfig = `configs: {group.initial.rebalance.delay.ms: "0", offsets.topic.num.partitions: "4", group.share.heartbeat.interval.ms: "1000"}`

// setShareGroupConfigs sets group configs (name, value pairs) with
// IncrementalAlterConfigs on the GROUP resource.
func setShareGroupConfigs(t *testing.T, cl *kgo.Client, group string, kvs ...string) {
	t.Helper()
	var lastErr error
	ok := pollUntil(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		for i := 0; i+1 < len(kvs); i += 2 {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op, c.Value = kvs[i], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kvs[i+1])
			res.Configs = append(res.Configs, c)
		}
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, cl)
		switch {
		case err != nil:
			lastErr = err
		case len(resp.Resources) != 1:
			lastErr = fmt.Errorf("%d resources answered", len(resp.Resources))
		case resp.Resources[0].ErrorCode != 0:
			lastErr = fmt.Errorf("error code %d (%v)", resp.Resources[0].ErrorCode, resp.Resources[0].ErrorMessage)
		default:
			return true
		}
		return false
	})
	if !ok {
		t.Fatalf("IncrementalAlterConfigs GROUP %s %v: %v", group, kvs, lastErr)
	}
}

// shareRecID is a record's place in the log.
type shareRecID struct {
	p   int32
	off int64
}

func (id shareRecID) String() string { return fmt.Sprintf("p%d@%d", id.p, id.off) }

// shareDelivery is one delivery of a record to a consumer.
type shareDelivery struct {
	consumer int
	count    int32 // the broker's delivery count
	buffered int64 // event number when kgo buffered it
}

// shareAckKind is the outcome of an accept: see the file comment.
type shareAckKind int

const (
	ackConfirmed shareAckKind = iota
	ackRefused
	ackUnknown
)

func (k shareAckKind) String() string {
	return [...]string{"confirmed", "refused", "unknown"}[k]
}

// shareAccept is the outcome of one accept of a record.
type shareAccept struct {
	kind shareAckKind
	why  string // the errors, for refused and unknown
	seq  int64  // event number of the (last) callback result
}

// shareRecord is what the consumers saw of one record.
type shareRecord struct {
	value      string
	deliveries []shareDelivery
	accepts    []shareAccept // one per delivery whose window closed, in order
}

// confirms returns the event numbers of the record's confirmed accepts.
func (sr *shareRecord) confirms() []int64 {
	var out []int64
	for _, a := range sr.accepts {
		if a.kind == ackConfirmed {
			out = append(out, a.seq)
		}
	}
	return out
}

// settled: confirmed, or the accept of its last delivery has an unknown outcome.
func (sr *shareRecord) settled() bool {
	if sr == nil {
		return false
	}
	if len(sr.confirms()) > 0 {
		return true
	}
	return len(sr.accepts) == len(sr.deliveries) && len(sr.accepts) > 0 && sr.accepts[len(sr.accepts)-1].kind == ackUnknown
}

// shareEvent marks a kill or restart on the event counter.
type shareEvent struct {
	seq  int64
	at   time.Duration
	what string
}

// shareRun is one test's producer, consumers and bookkeeping.
type shareRun struct {
	t            *testing.T
	topic, group string
	partitions   int32
	n            int
	seeds        []string
	began        time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	seq   atomic.Int64 // event counter: callbacks, buffered records, kills
	limit atomic.Int64 // the producer writes records below this number only

	mu           sync.Mutex
	produced     map[shareRecID]string // acknowledged by the producer
	prodFailed   []string
	producerDone bool
	recs         map[shareRecID]*shareRecord
	confirmed    int // records of produced with at least one confirmed accept
	waiters      []shareWaiter
	inflight     int // records polled whose accepts are not settled yet
	ackErrs      map[string]int
	fetchErrs    map[string]int
	flushWaits   int       // FlushAcks calls that timed out and were repeated
	lastChange   time.Time // of the last delivery or settled window
	events       []shareEvent
}

// shareWaiter is closed once confirmed reaches n.
type shareWaiter struct {
	n  int
	ch chan struct{}
}

func newShareRun(t *testing.T, seeds []string, topic, group string, partitions int32, n int) *shareRun {
	ctx, cancel := context.WithCancel(context.Background())
	r := &shareRun{t: t, topic: topic, group: group, partitions: partitions, n: n, seeds: seeds, began: time.Now(), ctx: ctx, cancel: cancel,
		produced: map[shareRecID]string{}, recs: map[shareRecID]*shareRecord{},
		ackErrs: map[string]int{}, fetchErrs: map[string]int{}, lastChange: time.Now()}
	t.Cleanup(r.stop) // a backstop; each test stops the run before its clients close
	return r
}

func (r *shareRun) since() time.Duration { return time.Since(r.began).Round(time.Millisecond) }

// event records a kill or restart on the event counter.
func (r *shareRun) event(format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	ev := shareEvent{seq: r.seq.Add(1), at: r.since(), what: what}
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	r.t.Logf("%s: %s (event %d; %s)", ev.at, what, ev.seq, r.progress())
}

// progress summarises the counts (r.mu not held).
func (r *shareRun) progress() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.progressLocked()
}

func (r *shareRun) progressLocked() string {
	return fmt.Sprintf("%d produced and acknowledged, %d of them accepted with confirmation, %d records seen, %d polled and not settled",
		len(r.produced), r.confirmed, len(r.recs), r.inflight)
}

// confirmedOne counts a produced record's first confirmed accept and wakes the
// waiters it satisfies. Called with r.mu held.
func (r *shareRun) confirmedOne() {
	r.confirmed++
	left := r.waiters[:0]
	for _, w := range r.waiters {
		if r.confirmed >= w.n {
			close(w.ch)
		} else {
			left = append(left, w)
		}
	}
	r.waiters = left
}

// stop stops the producer and the consumers and waits for them. The tests call it
// before their checks and register it with t.Cleanup after creating the clients, so
// that it runs before they are closed; newShareRun's registration is a backstop for
// a test that fails before that (the loops then end on ErrClientClosed).
func (r *shareRun) stop() {
	r.cancel()
	r.wg.Wait()
}

// startProducer writes records "0".."n-1" (record i to partition i mod partitions,
// acks=all, idempotent) in chunks of 50 with ProduceSync, never past r.limit,
// through a client of every seed.
func (r *shareRun) startProducer() {
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.seeds...), kgo.ClientID("share-fault-producer"),
		kgo.DefaultProduceTopic(r.topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(cl.Close)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			r.producerDone = true
			r.mu.Unlock()
		}()
		next := 0
		for next < r.n {
			pollUntil(time.Hour, func() bool { return r.ctx.Err() != nil || int64(next) < r.limit.Load() })
			if r.ctx.Err() != nil {
				return
			}
			end := min(next+50, int(r.limit.Load()), r.n)
			var recs []*kgo.Record
			for i := next; i < end; i++ {
				recs = append(recs, &kgo.Record{Partition: int32(i) % r.partitions, Value: []byte(strconv.Itoa(i))})
			}
			results := cl.ProduceSync(r.ctx, recs...)
			if r.ctx.Err() != nil || errors.Is(results.FirstErr(), kgo.ErrClientClosed) {
				return
			}
			r.mu.Lock()
			for _, pr := range results {
				if pr.Err != nil {
					r.prodFailed = append(r.prodFailed, fmt.Sprintf("%s: %v", pr.Record.Value, pr.Err))
					continue
				}
				r.produced[shareRecID{pr.Record.Partition, pr.Record.Offset}] = string(pr.Record.Value)
				if rec := r.recs[shareRecID{pr.Record.Partition, pr.Record.Offset}]; rec != nil && len(rec.confirms()) > 0 {
					r.confirmedOne() // consumed and confirmed before ProduceSync returned
				}
			}
			r.mu.Unlock()
			next = end
		}
	}()
}

// shareAckWindow collects the ack callback results of one consumer's window.
type shareAckWindow struct {
	mu  sync.Mutex
	res map[int32][]shareAckOutcome
}

type shareAckOutcome struct {
	err error
	seq int64
}

func (w *shareAckWindow) begin() {
	w.mu.Lock()
	w.res = map[int32][]shareAckOutcome{}
	w.mu.Unlock()
}

func (w *shareAckWindow) end() map[int32][]shareAckOutcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	res := w.res
	w.res = map[int32][]shareAckOutcome{}
	return res
}

// shareBufferedHook numbers records as kgo buffers them (HookFetchRecordBuffered).
type shareBufferedHook struct {
	seq *atomic.Int64
	mu  sync.Mutex
	at  map[*kgo.Record]int64
}

func (h *shareBufferedHook) OnFetchRecordBuffered(r *kgo.Record) {
	s := h.seq.Add(1)
	h.mu.Lock()
	h.at[r] = s
	h.mu.Unlock()
}

func (h *shareBufferedHook) take(r *kgo.Record) (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.at[r]
	delete(h.at, r)
	return s, ok
}

// startConsumers starts n kgo share consumers of the group; see the file comment for
// how each one accepts and tells confirmed accepts.
func (r *shareRun) startConsumers(n int) {
	for i := range n {
		w := &shareAckWindow{res: map[int32][]shareAckOutcome{}}
		hook := &shareBufferedHook{seq: &r.seq, at: map[*kgo.Record]int64{}}
		cl, err := kgo.NewClient(kgo.SeedBrokers(r.seeds...), kgo.ClientID(fmt.Sprintf("share-fault-%d", i)),
			kgo.ShareGroup(r.group), kgo.ConsumeTopics(r.topic), kgo.ShareMaxRecords(50),
			kgo.FetchMaxWait(time.Second), kgo.MetadataMinAge(250*time.Millisecond),
			// No transparent retries: kgo retries a request whose connection broke,
			// and a ShareAcknowledge whose first attempt the broker applied before
			// dying gets a refusal from its retry (SHARE_SESSION_NOT_FOUND after a
			// restart, say), which would read as "refused" here. With one attempt, a
			// Kafka error code is the answer to the request that carried the accept;
			// the source loop and the group loop retry on their own.
			kgo.RequestRetries(0), kgo.RetryTimeout(5*time.Second), kgo.WithHooks(hook),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				seq := r.seq.Add(1)
				w.mu.Lock()
				for _, res := range rs {
					if res.Topic == r.topic {
						w.res[res.Partition] = append(w.res[res.Partition], shareAckOutcome{res.Err, seq})
					}
				}
				w.mu.Unlock()
			}))
		if err != nil {
			r.t.Fatal(err)
		}
		r.t.Cleanup(cl.Close)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.consume(i, cl, w, hook)
		}()
	}
}

func (r *shareRun) consume(i int, cl *kgo.Client, w *shareAckWindow, hook *shareBufferedHook) {
	for r.ctx.Err() == nil {
		fs := cl.PollFetches(r.ctx)
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if r.ctx.Err() == nil {
				r.mu.Lock()
				r.fetchErrs[err.Error()]++
				r.mu.Unlock()
			}
		})
		var recs []*kgo.Record
		fs.EachRecord(func(rec *kgo.Record) { recs = append(recs, rec) })
		if len(recs) == 0 {
			continue
		}
		r.delivered(i, recs, hook)
		w.begin()
		cl.MarkAcks(kgo.AckAccept, recs...)
		for {
			fctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
			err := cl.FlushAcks(fctx)
			cancel()
			if err == nil {
				break
			}
			if r.ctx.Err() != nil {
				return // the window never closed: its accepts count for nothing
			}
			r.mu.Lock()
			r.flushWaits++
			r.mu.Unlock()
		}
		r.settle(recs, w.end())
	}
}

// delivered notes a poll's records.
func (r *shareRun) delivered(i int, recs []*kgo.Record, hook *shareBufferedHook) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastChange = time.Now()
	r.inflight += len(recs)
	for _, rec := range recs {
		buffered, ok := hook.take(rec)
		if !ok {
			r.t.Errorf("consumer %d: record %s-%d@%d polled without passing the buffered hook", i, rec.Topic, rec.Partition, rec.Offset)
			buffered = r.seq.Add(1)
		}
		id := shareRecID{rec.Partition, rec.Offset}
		sr := r.recs[id]
		if sr == nil {
			sr = &shareRecord{value: string(rec.Value)}
			r.recs[id] = sr
		} else if sr.value != string(rec.Value) {
			r.t.Errorf("record %s delivered with value %q, earlier with %q", id, rec.Value, sr.value)
		}
		sr.deliveries = append(sr.deliveries, shareDelivery{consumer: i, count: rec.DeliveryCount(), buffered: buffered})
	}
}

// settle records the outcome of a window's accepts, from their partitions' results.
func (r *shareRun) settle(recs []*kgo.Record, res map[int32][]shareAckOutcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastChange = time.Now()
	r.inflight -= len(recs)
	outcome := map[int32]shareAccept{}
	for _, rec := range recs {
		a, ok := outcome[rec.Partition]
		if !ok {
			a = classifyAcks(res[rec.Partition])
			outcome[rec.Partition] = a
			if a.kind != ackConfirmed {
				r.ackErrs[a.kind.String()+": "+a.why]++
			}
		}
		id := shareRecID{rec.Partition, rec.Offset}
		sr := r.recs[id]
		sr.accepts = append(sr.accepts, a)
		if _, prod := r.produced[id]; prod && a.kind == ackConfirmed && len(sr.confirms()) == 1 {
			r.confirmedOne()
		}
	}
}

// ambiguousAckError reports whether an acknowledgement answered with e may still have
// been applied. COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR and REQUEST_TIMED_OUT: the
// leader could not confirm the share-state write with the group's coordinator (it
// unloads the share-partition and reloads the state the coordinator holds, which has
// the acknowledgement if the write landed after all). INVALID_RECORD_STATE: the
// records are no longer held by the member, which is also the answer to a resent
// acknowledgement whose first attempt was applied.
func ambiguousAckError(e *kerr.Error) bool {
	switch e {
	case kerr.CoordinatorNotAvailable, kerr.NotCoordinator, kerr.RequestTimedOut, kerr.InvalidRecordState:
		return true
	}
	return false
}

// classifyAcks turns a partition's results in one window into an outcome.
func classifyAcks(outs []shareAckOutcome) shareAccept {
	if len(outs) == 0 {
		return shareAccept{kind: ackUnknown, why: "no acknowledgement result"}
	}
	var ok, refused, other int
	var why []string
	var seq int64
	for _, o := range outs {
		seq = max(seq, o.seq)
		var ke *kerr.Error
		switch {
		case o.err == nil:
			ok++
		case errors.As(o.err, &ke) && !ambiguousAckError(ke):
			refused++
			why = append(why, o.err.Error())
		default:
			other++
			why = append(why, o.err.Error())
		}
	}
	switch {
	case refused == 0 && other == 0:
		return shareAccept{kind: ackConfirmed, seq: seq}
	case ok == 0 && other == 0:
		return shareAccept{kind: ackRefused, why: strings.Join(why, "; "), seq: seq}
	case ok > 0:
		return shareAccept{kind: ackUnknown, why: "mixed results: " + strings.Join(why, "; "), seq: seq}
	}
	return shareAccept{kind: ackUnknown, why: strings.Join(why, "; "), seq: seq}
}

// waitConfirmed waits until at least n produced records were accepted with
// confirmation.
func (r *shareRun) waitConfirmed(n int, timeout time.Duration, what string) {
	r.t.Helper()
	ch := make(chan struct{})
	r.mu.Lock()
	if r.confirmed >= n {
		close(ch)
	} else {
		r.waiters = append(r.waiters, shareWaiter{n, ch})
	}
	r.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(timeout):
		r.t.Errorf("%s: fewer than %d records accepted with confirmation within %s: %s; accept errors %v; fetch errors %v; events %s",
			what, n, timeout, r.progress(), r.ackErrsSnapshot(), r.fetchErrsSnapshot(), r.eventsString())
		r.reportUnsettled(false)
		r.t.FailNow()
	}
	r.t.Logf("%s: %s (%s)", r.since(), what, r.progress())
}

func (r *shareRun) ackErrsSnapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.ackErrs)
}

func (r *shareRun) fetchErrsSnapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.fetchErrs)
}

// waitDone waits until the producer wrote all n records and each one it got
// acknowledged is settled: confirmed, or with an unknown last accept. It gives up
// after timeout, or once nothing was delivered or settled for stall (the acquisition
// lock is 5s, so a record whose accept was refused is delivered again well within
// that). It reports whether every record settled; the caller goes on to the other
// checks either way.
func (r *shareRun) waitDone(timeout, stall time.Duration) bool {
	r.t.Helper()
	r.limit.Store(int64(r.n))
	done := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.producerDone {
			return false
		}
		for id := range r.produced {
			if !r.recs[id].settled() {
				return false
			}
		}
		return true
	}
	stalled := false
	pollUntil(timeout, func() bool {
		if done() {
			return true
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		stalled = time.Since(r.lastChange) > stall
		return stalled
	})
	if done() {
		r.t.Logf("%s: every acknowledged record settled (%s)", r.since(), r.progress())
		return true
	}
	how := fmt.Sprintf("within %s", timeout)
	if stalled {
		how = fmt.Sprintf("(nothing delivered or settled for %s)", stall)
	}
	r.t.Errorf("not every acknowledged record settled %s: %s; accept errors %v; fetch errors %v; events %s",
		how, r.progress(), r.ackErrsSnapshot(), r.fetchErrsSnapshot(), r.eventsString())
	r.reportUnsettled(true)
	return false
}

// reportUnsettled lists the records the producer got acknowledged that are neither
// confirmed nor with an unknown last accept (when all, also the ones not delivered
// yet), by partition and with examples.
func (r *shareRun) reportUnsettled(all bool) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var missing []string
	type partMissing struct {
		n, first, last int64
		why            map[string]int
	}
	byPart := map[int32]*partMissing{}
	for id, v := range r.produced {
		sr := r.recs[id]
		if sr.settled() || (!all && (sr == nil || len(sr.accepts) < len(sr.deliveries))) {
			continue
		}
		missing = append(missing, r.describeLocked(id, v))
		pm := byPart[id.p]
		if pm == nil {
			pm = &partMissing{first: id.off, last: id.off, why: map[string]int{}}
			byPart[id.p] = pm
		}
		pm.n++
		pm.first, pm.last = min(pm.first, id.off), max(pm.last, id.off)
		why := "never delivered"
		if sr != nil {
			why = fmt.Sprintf("%d deliveries, accepts %s", len(sr.deliveries), acceptsString(sr.accepts))
		}
		pm.why[why]++
	}
	if len(missing) == 0 {
		return
	}
	var summary []string
	for _, p := range slices.Sorted(maps.Keys(byPart)) {
		pm := byPart[p]
		summary = append(summary, fmt.Sprintf("partition %d: %d records between offsets %d and %d: %v", p, pm.n, pm.first, pm.last, pm.why))
	}
	sort.Strings(missing)
	r.t.Errorf("%d acknowledged records neither confirmed nor with an unknown last accept (producer done: %v):\n%s\ne.g.:\n%s",
		len(missing), r.producerDone, strings.Join(summary, "\n"), strings.Join(head10(missing), "\n"))
}

func acceptsString(as []shareAccept) string {
	var s []string
	for _, a := range as {
		if a.kind == ackConfirmed {
			s = append(s, fmt.Sprintf("confirmed at event %d", a.seq))
		} else {
			s = append(s, fmt.Sprintf("%s at event %d (%s)", a.kind, a.seq, a.why))
		}
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func head10(s []string) []string { return s[:min(len(s), 10)] }

// describeLocked tells the story of one record.
func (r *shareRun) describeLocked(id shareRecID, value string) string {
	sr := r.recs[id]
	if sr == nil {
		return fmt.Sprintf("%s (value %q): never delivered", id, value)
	}
	var ds []string
	for _, d := range sr.deliveries {
		ds = append(ds, fmt.Sprintf("consumer %d delivery #%d at event %d", d.consumer, d.count, d.buffered))
	}
	return fmt.Sprintf("%s (value %q): deliveries [%s], accepts %s", id, sr.value, strings.Join(ds, ", "), acceptsString(sr.accepts))
}

func (r *shareRun) eventsString() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.eventsStringLocked()
}

// check runs the assertions on what the consumers saw (the run is stopped).
func (r *shareRun) check() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var twice, after, lost, notProduced, badValue, unknownLast, never []string
	redelivered, redeliveredAcrossKill, maxCount := 0, 0, int32(0)
	kinds := map[shareAckKind]int{}
	values := map[string]shareRecID{}
	for id, v := range r.produced {
		if r.recs[id] == nil {
			never = append(never, r.describeLocked(id, v))
		}
	}
	for id, sr := range r.recs {
		if v, ok := r.produced[id]; ok && v != sr.value {
			badValue = append(badValue, fmt.Sprintf("%s: delivered %q, produced %q", id, sr.value, v))
		} else if !ok {
			notProduced = append(notProduced, r.describeLocked(id, ""))
		}
		if prev, dup := values[sr.value]; dup {
			badValue = append(badValue, fmt.Sprintf("value %q at both %s and %s", sr.value, prev, id))
		}
		values[sr.value] = id
		for _, a := range sr.accepts {
			kinds[a.kind]++
		}
		confirms := sr.confirms()
		if len(confirms) > 1 {
			twice = append(twice, r.describeLocked(id, r.produced[id]))
		}
		if len(confirms) > 0 {
			first := slices.Min(confirms)
			for _, d := range sr.deliveries {
				if d.buffered > first {
					after = append(after, r.describeLocked(id, r.produced[id]))
					break
				}
			}
		} else if n := len(sr.accepts); n > 0 && n == len(sr.deliveries) {
			switch sr.accepts[n-1].kind {
			case ackRefused:
				lost = append(lost, r.describeLocked(id, r.produced[id]))
			case ackUnknown:
				unknownLast = append(unknownLast, r.describeLocked(id, r.produced[id]))
			}
		}
		if len(sr.deliveries) > 1 {
			redelivered++
			firstSeq, lastSeq := sr.deliveries[0].buffered, sr.deliveries[len(sr.deliveries)-1].buffered
			for _, e := range r.events {
				if firstSeq < e.seq && e.seq < lastSeq {
					redeliveredAcrossKill++
					break
				}
			}
		}
		for _, d := range sr.deliveries {
			maxCount = max(maxCount, d.count)
		}
	}
	for _, l := range [][]string{twice, after, lost, notProduced, badValue, unknownLast, never} {
		sort.Strings(l)
	}
	r.t.Logf("%s: %d records produced and acknowledged (%d produce failures), %d delivered; %d delivered more than once (%d of them with a kill or restart between the first and last delivery), highest delivery count %d; accepts %d confirmed, %d refused, %d unknown; %d records never confirmed, their last accept unknown; accept errors %v; fetch errors %v; FlushAcks repeated %d times; events %s",
		r.since(), len(r.produced), len(r.prodFailed), len(r.recs), redelivered, redeliveredAcrossKill, maxCount,
		kinds[ackConfirmed], kinds[ackRefused], kinds[ackUnknown], len(unknownLast), r.ackErrs, r.fetchErrs, r.flushWaits,
		r.eventsStringLocked())
	if len(r.prodFailed) > 0 {
		r.t.Logf("produce failures (not counted as acknowledged), e.g. %q", head10(r.prodFailed))
	}
	if len(unknownLast) > 0 {
		r.t.Logf("records never confirmed, their last accept without an answer (taken by the broker: the start offsets passed them), e.g.:\n%s",
			strings.Join(head10(unknownLast), "\n"))
	}
	if len(notProduced) > 0 {
		r.t.Logf("%d delivered records the producer did not get acknowledged, e.g.:\n%s", len(notProduced), strings.Join(head10(notProduced), "\n"))
	}
	if len(never) > 0 {
		r.t.Errorf("%d acknowledged records never delivered, e.g.:\n%s", len(never), strings.Join(head10(never), "\n"))
	}
	if len(badValue) > 0 {
		r.t.Errorf("records with unexpected values:\n%s", strings.Join(head10(badValue), "\n"))
	}
	if len(twice) > 0 {
		r.t.Errorf("%d records accepted with confirmation more than once (a confirmed accept was lost), e.g.:\n%s",
			len(twice), strings.Join(head10(twice), "\n"))
	}
	if len(after) > 0 {
		r.t.Errorf("%d records delivered again after their accept was confirmed, e.g.:\n%s",
			len(after), strings.Join(head10(after), "\n"))
	}
	if len(lost) > 0 {
		r.t.Errorf("%d records whose last accept the broker refused were never delivered again (the refused accept was applied), e.g.:\n%s",
			len(lost), strings.Join(head10(lost), "\n"))
	}
}

func (r *shareRun) eventsStringLocked() string {
	var s []string
	for _, e := range r.events {
		s = append(s, fmt.Sprintf("%s at event %d (%s)", e.what, e.seq, e.at))
	}
	return "[" + strings.Join(s, "; ") + "]"
}

// waitNoLag polls DescribeShareGroupOffsets until every partition of the topic has
// its share-partition start offset at the end of the log (lag 0): every record was
// acknowledged and that state is durable at the coordinator.
func (r *shareRun) waitNoLag(cl *kgo.Client, partitions int32, timeout time.Duration) {
	r.t.Helper()
	adm := kadm.NewClient(cl)
	var last string
	if !pollUntil(timeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, r.topic)
		if err != nil {
			last = fmt.Sprintf("ListEndOffsets: %v", err)
			return false
		}
		d, err := adm.DescribeShareGroupOffsets(ctx, r.group)
		if err != nil {
			last = fmt.Sprintf("DescribeShareGroupOffsets: %v", err)
			return false
		}
		g, ok := d[r.group]
		if !ok || g.Err != nil {
			last = fmt.Sprintf("DescribeShareGroupOffsets: group %v", g.Err)
			return false
		}
		var parts []string
		done := true
		for p := range partitions {
			end, ok1 := ends.Lookup(r.topic, p)
			so, ok2 := g.Offsets[r.topic][p]
			if !ok1 || !ok2 || end.Err != nil || so.Err != nil || so.StartOffset != end.Offset || so.Lag != 0 {
				done = false
			}
			parts = append(parts, fmt.Sprintf("p%d start %d lag %d end %d (%v %v)", p, so.StartOffset, so.Lag, end.Offset, so.Err, end.Err))
		}
		last = strings.Join(parts, ", ")
		return done
	}) {
		r.t.Errorf("share-partition start offsets not at the log end within %s: %s", timeout, last)
		return
	}
	r.t.Logf("%s: share group offsets at the log end: %s", r.since(), last)
}

// TestShareGroupBrokerKill: one broker, a 3-partition topic, a paced producer and
// three kgo share consumers; once a third of the records are accepted with
// confirmation the broker is SIGKILLed (with records in flight: the producer is held
// at most 300 records ahead of that point) and restarted on its data dir while the
// clients keep running. The checks are the file comment's: every acknowledged record
// ends confirmed (or with an unanswered last accept), none is confirmed twice or
// delivered again after its confirmation, none whose accept was refused is lost, and
// the share-partition start offsets reach the log end.
func TestShareGroupBrokerKill(t *testing.T) {
	t.Parallel()
	const (
		topic, group = "share-kill", "share-kill-group"
		n, lead      = 2000, 300
	)
	b := startBrokerConfig(t, shareFaultBrokerConfig)
	createTopic(t, b.addr, topic, 3)
	admin := newClient(t, b.addr)
	setShareGroupConfigs(t, admin, group, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "5000")

	r := newShareRun(t, []string{b.addr}, topic, group, 3, n)
	r.startConsumers(3)
	r.limit.Store(n/3 + lead)
	r.startProducer()
	t.Cleanup(r.stop)

	r.waitConfirmed(n/3, 30*time.Second, "a third accepted")
	r.event("SIGKILL broker")
	b.kill()
	r.event("broker killed")
	b.start()
	r.event("broker restarted")
	r.waitDone(40*time.Second, 12*time.Second)
	r.waitNoLag(admin, 3, 15*time.Second)
	r.stop()
	r.check()
}

// TestShareGroupClusterKill: three brokers, a 6-partition topic with RF 3 and
// min.insync.replicas 2, __consumer_offsets with RF 3; the producer and the three
// share consumers have every broker as a seed. Stage 1 SIGKILLs the broker leading
// most of the topic's partitions, checks that consumption goes on without it, and
// restarts it; stage 2 does the same to the group's coordinator (FindCoordinator at
// that point; possibly the same broker). Each kill comes with records in flight (the
// producer is held at most 300 records ahead of the kill point). Same checks as
// TestShareGroupBrokerKill.
func TestShareGroupClusterKill(t *testing.T) {
	t.Parallel()
	const (
		topic, group = "share-cluster-kill", "share-cluster-kill-group"
		partitions   = 6
		n, lead      = 3000, 300
	)
	c := newClusterWith(t, 3, 3, nil, clusterOpt{configs: withReplConfigs(map[string]string{
		"offsets.topic.replication.factor":  "3",
		"offsets.topic.num.partitions":      "4",
		"group.initial.rebalance.delay.ms":  "0",
		"group.share.heartbeat.interval.ms": "1000",
	})})
	c.startAll()
	c.waitAllSeeAll(60*time.Second, allThree)
	c.node(1).mustCreateTopic(30*time.Second, topic, partitions, 3, map[string]string{"min.insync.replicas": "2"})
	c.node(1).waitPartitions(30*time.Second, topic, "ISR whole", fullISR(allThree))
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ClientID("share-fault-admin"),
		kgo.RetryTimeout(10*time.Second), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	setShareGroupConfigs(t, admin, group, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "5000")

	r := newShareRun(t, c.seeds(), topic, group, partitions, n)
	r.startConsumers(3)
	r.limit.Store(100)
	r.startProducer()
	t.Cleanup(r.stop)
	r.waitConfirmed(50, 30*time.Second, "consuming")
	// The consumers' FindCoordinator created __consumer_offsets.
	c.node(1).waitPartitions(30*time.Second, "__consumer_offsets", "ISR whole", fullISR(allThree))

	// stage kills victim once killAt records are confirmed (the producer is at most
	// lead records ahead: those are in flight), lets the producer go on to
	// killAt+3*lead, waits for killAt+2*lead confirmed (progress without the victim;
	// the slack covers accepts that end without an answer, never confirmed), and
	// restarts the victim.
	stage := func(victim *clusterNode, why string, killAt int) {
		t.Helper()
		r.limit.Store(int64(killAt + lead))
		r.waitConfirmed(killAt, 30*time.Second, fmt.Sprintf("%d accepted", killAt))
		r.event("SIGKILL broker %d (%s)", victim.id, why)
		victim.kill()
		r.event("broker %d killed", victim.id)
		// The two others take over: consumption goes on without the victim.
		r.limit.Store(int64(killAt + 3*lead))
		progressAt := killAt + 2*lead
		r.waitConfirmed(progressAt, 40*time.Second, fmt.Sprintf("%d accepted with broker %d down", progressAt, victim.id))
		victim.restart()
		r.event("broker %d restarted", victim.id)
		other := c.others(victim)[0]
		other.waitPartitions(60*time.Second, topic, "ISR whole again", fullISR(allThree))
		other.waitPartitions(60*time.Second, "__consumer_offsets", "ISR whole again", fullISR(allThree))
	}

	// Stage 1: the broker leading most of the topic's partitions.
	v := c.node(1).waitView(20*time.Second, "topic led", func(v *view) bool { return allLed(v, topic, partitions) }, topic)
	counts := v.leaderCounts(topic)
	lead1 := int32(1)
	for id, k := range counts {
		if k > counts[lead1] || k == counts[lead1] && id < lead1 {
			lead1 = id
		}
	}
	coord1 := shareCoordinator(t, admin, group)
	t.Logf("leaders of %s: %v (broker %d leads %d); coordinator of %s: broker %d", topic, v.leaders[topic], lead1, counts[lead1], group, coord1)
	stage(c.node(lead1), fmt.Sprintf("leads %d of %d partitions; coordinator is %d", counts[lead1], partitions, coord1), 500)

	// Stage 2: the group's coordinator now.
	coord2 := shareCoordinator(t, admin, group)
	stage(c.node(coord2), "the group's coordinator", 1700)

	r.waitDone(40*time.Second, 12*time.Second)
	r.waitNoLag(admin, partitions, 15*time.Second)
	r.stop()
	r.check()
}

// shareCoordinator asks for group's coordinator (FindCoordinator), retrying errors.
func shareCoordinator(t *testing.T, cl *kgo.Client, group string) int32 {
	t.Helper()
	adm := kadm.NewClient(cl)
	var id int32 = -1
	var lastErr error
	if !pollUntil(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, ok := adm.FindGroupCoordinators(ctx, group)[group]
		switch {
		case !ok:
			lastErr = errors.New("no answer")
		case resp.Err != nil:
			lastErr = resp.Err
		default:
			id = resp.NodeID
			return true
		}
		return false
	}) {
		t.Fatalf("FindCoordinator %s: %v", group, lastErr)
	}
	return id
}
