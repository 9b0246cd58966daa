package groups_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// fastGroupConfig is groupConfig allowing short sessions, so membership changes settle
// quickly.
const fastGroupConfig = groupConfig + `  group.min.session.timeout.ms: "1000"
`

// fastGroupOpts are kgo group options for quick rebalances: frequent heartbeats
// (members learn of a rebalance within 100ms), short sessions and rebalance timeouts.
func fastGroupOpts(group string, topics ...string) []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.SessionTimeout(2 * time.Second),
		kgo.RebalanceTimeout(4 * time.Second),
		kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}
}

// waitFor is testbroker.WaitFor, under the name this package's tests use.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	testbroker.WaitFor(t, timeout, what, cond)
}

// startWithTopic starts a broker from cfg, creates topic with parts partitions and
// returns the broker and an admin client of it.
func startWithTopic(t testing.TB, cfg, topic string, parts int32) (*testbroker.Broker, *kadm.Client) {
	t.Helper()
	b := testbroker.Start(t, testbroker.WithConfig(cfg))
	adm := b.Admin(t)
	createTopic(t, adm, topic, parts)
	return b, adm
}

// describeGroup describes group with DescribeGroups within timeout; the group's own
// error stays in the result's Err.
func describeGroup(adm *kadm.Client, group string, timeout time.Duration) (kadm.DescribedGroup, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return kadm.DescribedGroup{}, err
	}
	return ds[group], nil
}

func createTopic(t testing.TB, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// producer writes records with increasing sequence numbers as values, round-robin
// over the partitions, until stopped; acked holds what the broker acknowledged.
type producer struct {
	cl     *kgo.Client
	topic  string
	parts  int32
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	acked  map[string]bool
	failed atomic.Int64
}

func startProducer(t testing.TB, b *testbroker.Broker, topic string, parts int32) *producer {
	p := &producer{
		cl:    b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.MetadataMinAge(100*time.Millisecond)),
		topic: topic, parts: parts,
		stop: make(chan struct{}), done: make(chan struct{}),
		acked: map[string]bool{},
	}
	go p.run()
	return p
}

func (p *producer) run() {
	defer close(p.done)
	seq := 0
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			_ = p.cl.Flush(context.Background())
			return
		case <-tick.C:
		}
		for range p.parts {
			v := strconv.Itoa(seq)
			r := &kgo.Record{Topic: p.topic, Partition: int32(seq) % p.parts, Value: []byte(v)}
			seq++
			p.cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
				if err != nil {
					p.failed.Add(1)
					return
				}
				p.mu.Lock()
				p.acked[v] = true
				p.mu.Unlock()
			})
		}
	}
}

// Stop stops producing and waits for every outstanding record to be acknowledged.
func (p *producer) Stop() map[string]bool {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.acked)
}

// seenSet counts the distinct record values consumed by any consumer.
type seenSet struct {
	mu   sync.Mutex
	seen map[string]int
}

func newSeenSet() *seenSet { return &seenSet{seen: map[string]int{}} }

func (s *seenSet) add(v string) {
	s.mu.Lock()
	s.seen[v]++
	s.mu.Unlock()
}

// missing returns how many of want were not seen, and one example.
func (s *seenSet) missing(want map[string]bool) (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ex := 0, ""
	for v := range want {
		if s.seen[v] == 0 {
			n++
			ex = v
		}
	}
	return n, ex
}

// poller polls a group member's client in a goroutine until stop.
type poller struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// startPolling polls cl in a goroutine, handing every poll's fetches to each, until
// the client is closed or stop is called; stop also runs at test end.
func startPolling(t testing.TB, cl *kgo.Client, each func(kgo.Fetches)) *poller {
	ctx, cancel := context.WithCancel(context.Background())
	p := &poller{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			each(fs)
			if fs.IsClientClosed() {
				return
			}
		}
	}()
	t.Cleanup(p.stop)
	return p
}

// stop stops polling and closes the client, which commits and leaves the group.
func (p *poller) stop() {
	p.cancel()
	<-p.done
	p.cl.Close()
}

// waitConsumed waits until every value of acked was seen.
func (s *seenSet) waitConsumed(t testing.TB, timeout time.Duration, acked map[string]bool) {
	t.Helper()
	testbroker.WaitFor(t, timeout, "every acknowledged record consumed", func() string {
		if n, ex := s.missing(acked); n > 0 {
			return fmtMissing(n, len(acked), ex)
		}
		return ""
	})
}

// consumer is a group member polling in a goroutine, tracking the partitions it owns
// from kgo's assignment callbacks and the first offset it saw of each partition.
type consumer struct {
	name string
	*poller

	mu      sync.Mutex
	owned   map[int32]bool
	first   map[int32]int64
	revokes int
	fetchEr []error
}

// startConsumer starts a member; extra options come after the defaults. The client is
// closed by stop (or at test end).
func startConsumer(t testing.TB, b *testbroker.Broker, name string, seen *seenSet, opts ...kgo.Opt) *consumer {
	t.Helper()
	c := &consumer{name: name, owned: map[int32]bool{}, first: map[int32]int64{}}
	all := append([]kgo.Opt{
		kgo.SeedBrokers(b.Addr),
		kgo.ClientID(name),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, ps := range m {
				for _, p := range ps {
					c.owned[p] = true
				}
			}
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			// Overriding the revoke callback disables kgo's commit on revoke; do it here.
			_ = cl.CommitUncommittedOffsets(ctx)
			c.mu.Lock()
			defer c.mu.Unlock()
			c.revokes++
			for _, ps := range m {
				for _, p := range ps {
					delete(c.owned, p)
				}
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, ps := range m {
				for _, p := range ps {
					delete(c.owned, p)
				}
			}
		}),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("client %s: %v", name, err)
	}
	c.poller = startPolling(t, cl, func(fs kgo.Fetches) {
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
				c.mu.Lock()
				c.fetchEr = append(c.fetchEr, err)
				c.mu.Unlock()
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			c.mu.Lock()
			if _, ok := c.first[r.Partition]; !ok {
				c.first[r.Partition] = r.Offset
			}
			c.mu.Unlock()
			if seen != nil {
				seen.add(string(r.Value))
			}
		})
	})
	return c
}

func (c *consumer) ownedSet() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int32
	for p := range c.owned {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func (c *consumer) memberID() string {
	id, _ := c.cl.GroupMetadata()
	return id
}

// stableAssignment waits until the group is Stable with exactly the members of cs,
// the broker's assignments are disjoint and cover partitions 0..parts-1 of topic, and
// every consumer owns (per kgo's callbacks) exactly what the broker says it was
// assigned. It returns the assignment by consumer name.
func stableAssignment(t testing.TB, adm *kadm.Client, group, topic string, parts int32, cs []*consumer) map[string][]int32 {
	t.Helper()
	var out map[string][]int32
	testbroker.WaitFor(t, 15*time.Second, fmt.Sprintf("group %s stable with %d members", group, len(cs)), func() string {
		d, err := describeGroup(adm, group, 5*time.Second)
		if err != nil {
			return err.Error()
		}
		if d.Err != nil {
			return d.Err.Error()
		}
		if d.State != "Stable" || len(d.Members) != len(cs) {
			return fmt.Sprintf("state %s with %d members", d.State, len(d.Members))
		}
		byMember := map[string][]int32{}
		owner := map[int32]string{}
		for _, m := range d.Members {
			a, ok := m.Assigned.AsConsumer()
			if !ok {
				return "assignment is not a consumer assignment"
			}
			var ps []int32
			for _, at := range a.Topics {
				if at.Topic != topic {
					return "assigned foreign topic " + at.Topic
				}
				for _, p := range at.Partitions {
					if prev, dup := owner[p]; dup {
						return fmt.Sprintf("partition %d assigned to both %s and %s", p, prev, m.MemberID)
					}
					owner[p] = m.MemberID
					ps = append(ps, p)
				}
			}
			slices.Sort(ps)
			byMember[m.MemberID] = ps
		}
		if len(owner) != int(parts) {
			return fmt.Sprintf("%d of %d partitions assigned", len(owner), parts)
		}
		byName, why := ownedAsAssigned(cs, byMember)
		out = byName
		return why
	})
	return out
}

// ownedAsAssigned checks that every consumer of cs is a member of byMember (member id
// -> partitions, as the broker assigned them) and owns, per kgo's callbacks, exactly
// its partitions. It returns the partitions by consumer name, or why not.
func ownedAsAssigned(cs []*consumer, byMember map[string][]int32) (map[string][]int32, string) {
	out := map[string][]int32{}
	for _, c := range cs {
		id := c.memberID()
		want, ok := byMember[id]
		if !ok {
			return nil, fmt.Sprintf("consumer %s (member %q) not in the group", c.name, id)
		}
		if got := c.ownedSet(); !slices.Equal(got, want) {
			return nil, fmt.Sprintf("consumer %s owns %v, broker assigned %v", c.name, got, want)
		}
		out[c.name] = want
	}
	return out, ""
}

// rawConn speaks the Kafka protocol over one TCP connection, so tests choose the exact
// request version.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	r    *bufio.Reader
	corr int32
	f    *kmsg.RequestFormatter
}

func dialRaw(t testing.TB, addr, clientID string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
}

// send writes req (at the version it carries) and returns its correlation id.
func (rc *rawConn) send(req kmsg.Request) int32 {
	rc.t.Helper()
	rc.corr++
	buf := rc.f.AppendRequest(nil, req, rc.corr)
	_ = rc.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.c.Write(buf); err != nil {
		rc.t.Fatalf("write %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return rc.corr
}

// recv reads the response to req (sent with correlation id corr).
func (rc *rawConn) recv(req kmsg.Request, corr int32) kmsg.Response {
	rc.t.Helper()
	resp, err := rc.tryRecv(req, corr, 15*time.Second)
	if err != nil {
		rc.t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

func (rc *rawConn) tryRecv(req kmsg.Request, corr int32, timeout time.Duration) (kmsg.Response, error) {
	_ = rc.c.SetReadDeadline(time.Now().Add(timeout))
	var size [4]byte
	if _, err := io.ReadFull(rc.r, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(rc.r, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		n, l := binary.Uvarint(body)
		if l <= 0 || n != 0 {
			return nil, fmt.Errorf("unexpected response header tags")
		}
		body = body[l:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return resp, nil
}

// do sends req and waits for its response.
func (rc *rawConn) do(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	return rc.recv(req, rc.send(req))
}

func ptr[T any](v T) *T { return &v }

func fmtMap[K cmp.Ordered, V any](m map[K]V) string {
	ks := slices.Sorted(maps.Keys(m))
	s := "{"
	for i, k := range ks {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%v:%v", k, m[k])
	}
	return s + "}"
}

func fmtMissing(n, of int, example string) string {
	return fmt.Sprintf("%d of %d records not consumed (e.g. value %s)", n, of, example)
}
