package groups_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// Benchmarks of the coordinator through real sockets (see docs/BENCHMARKS.md,
// "Consumer groups"). Every figure is a request acknowledged to a franz-go client by
// an in-process broker: commits are durable (log append + badger fsync) when
// answered.

// benchOffsetsPartitions is offsets.topic.num.partitions of the bench broker (Kafka's
// default).
const benchOffsetsPartitions = 50

const benchConfig = `
configs:
  group.initial.rebalance.delay.ms: "0"
  offsets.topic.num.partitions: "50"
`

// benchBroker starts a broker with topic (parts partitions) and returns it and the
// topic's id.
func benchBroker(b *testing.B, topic string, parts int32) (*testbroker.Broker, [16]byte) {
	b.Helper()
	br := testbroker.Start(b, testbroker.WithConfig(benchConfig))
	adm := br.Admin(b)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := adm.CreateTopic(ctx, parts, 1, nil, topic)
	if err != nil {
		b.Fatal(err)
	}
	if res.Err != nil {
		b.Fatal(res.Err)
	}
	return br, res.ID
}

// benchCommitter sends simple (generation -1, no member id) OffsetCommits for one group.
type benchCommitter struct {
	cl      *kgo.Client
	group   string
	topic   string
	topicID [16]byte
}

func newBenchCommitter(b *testing.B, br *testbroker.Broker, group, topic string, id [16]byte) *benchCommitter {
	return &benchCommitter{cl: br.Client(b), group: group, topic: topic, topicID: id}
}

// commit commits offset off for partitions [first, first+n) in one request and returns
// the first error (of the request or of a partition).
func (c *benchCommitter) commit(ctx context.Context, first, n int32, off int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = c.group
	req.Generation = -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic, t.TopicID = c.topic, c.topicID // name for v0-v9, id for v10+
	t.Partitions = make([]kmsg.OffsetCommitRequestTopicPartition, n)
	for i := range n {
		p := &t.Partitions[i]
		p.Partition, p.Offset, p.LeaderEpoch = first+i, off, -1
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return err
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("group %s partition %d: %w", c.group, rp.Partition, err)
			}
		}
	}
	return nil
}

// benchGroupsOn returns n group names: on distinct __consumer_offsets partitions if spread,
// else all on the same one.
func benchGroupsOn(prefix string, n int, spread bool) []string {
	var out []string
	used := map[int32]bool{}
	target := int32(-1)
	for i := 0; len(out) < n; i++ {
		g := fmt.Sprintf("%s-%d", prefix, i)
		p := offsets.PartitionFor(g, benchOffsetsPartitions)
		switch {
		case spread && used[p]:
			continue
		case !spread && target >= 0 && p != target:
			continue
		}
		used[p], target = true, p
		out = append(out, g)
	}
	return out
}

func benchReportCommits(b *testing.B, perOp int) {
	b.ReportMetric(float64(b.N*perOp)/b.Elapsed().Seconds(), "commits/s")
}

// BenchmarkOffsetCommit measures acknowledged simple commits (one partition-commit =
// one offset of one partition):
//
//   - sequential: one client, one partition per request, one request at a time (the
//     round trip + append + fsync latency);
//   - parallel16-spread: 16 clients of 16 groups on 16 distinct __consumer_offsets
//     partitions, one partition per request (16 writers, no coalescing);
//   - parallel16-samepartition: 16 clients of 16 groups on the same __consumer_offsets
//     partition (one writer, which coalesces concurrent commits into one flush);
//   - batch100: one client, 100 partitions per request.
//
// ns/op is wall time per request (for the parallel cases: over all 16 committers).
func BenchmarkOffsetCommit(b *testing.B) {
	const topic, parts = "bench", 100
	br, id := benchBroker(b, topic, parts)
	ctx := context.Background()

	b.Run("sequential", func(b *testing.B) {
		c := newBenchCommitter(b, br, "bench-seq", topic, id)
		if err := c.commit(ctx, 0, 1, 0); err != nil { // find + load the coordinator
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			if err := c.commit(ctx, int32(i%parts), 1, int64(i)); err != nil {
				b.Fatal(err)
			}
		}
		benchReportCommits(b, 1)
	})

	parallel := func(spread bool) func(*testing.B) {
		return func(b *testing.B) {
			const n = 16
			prefix := "bench-same"
			if spread {
				prefix = "bench-spread"
			}
			var cs []*benchCommitter
			for _, g := range benchGroupsOn(prefix, n, spread) {
				c := newBenchCommitter(b, br, g, topic, id)
				if err := c.commit(ctx, 0, 1, 0); err != nil {
					b.Fatal(err)
				}
				cs = append(cs, c)
			}
			var next atomic.Int64
			var latency atomic.Int64
			var failed atomic.Pointer[error]
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, c := range cs {
				wg.Go(func() {
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) || failed.Load() != nil {
							return
						}
						start := time.Now()
						if err := c.commit(ctx, int32(i%parts), 1, i); err != nil {
							failed.Store(&err)
							return
						}
						latency.Add(int64(time.Since(start)))
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
			benchReportCommits(b, 1)
			b.ReportMetric(float64(latency.Load())/float64(b.N)/1e6, "ms-latency")
		}
	}
	b.Run("parallel16-spread", parallel(true))
	b.Run("parallel16-samepartition", parallel(false))

	b.Run("batch100", func(b *testing.B) {
		c := newBenchCommitter(b, br, "bench-batch", topic, id)
		if err := c.commit(ctx, 0, parts, 0); err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			if err := c.commit(ctx, 0, parts, int64(i)); err != nil {
				b.Fatal(err)
			}
		}
		benchReportCommits(b, parts)
	})
}

// benchMember is one classic group member driven with raw JoinGroup/SyncGroup/
// Heartbeat/LeaveGroup requests over its own client (connection).
type benchMember struct {
	cl       *kgo.Client
	group    string
	topic    string
	memberID string
	gen      int32
	leader   bool
	members  []string // the join response's members, for the leader
}

const (
	benchSessionMs   = 30_000
	benchRebalanceMs = 60_000
)

// join sends a JoinGroup (franz-go picks v9, the highest both sides support).
func (m *benchMember) join(ctx context.Context) (*kmsg.JoinGroupResponse, error) {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group = m.group
	req.SessionTimeoutMillis = benchSessionMs
	req.RebalanceTimeoutMillis = benchRebalanceMs
	req.MemberID = m.memberID
	req.ProtocolType = "consumer"
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = []string{m.topic}
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "roundrobin", md.AppendTo(nil)
	req.Protocols = append(req.Protocols, p)
	return req.RequestWith(ctx, m.cl)
}

// handshake sends the first JoinGroup (no member id) and keeps the member id of the
// MEMBER_ID_REQUIRED answer (KIP-394).
func (m *benchMember) handshake(ctx context.Context) error {
	m.memberID = ""
	resp, err := m.join(ctx)
	if err != nil {
		return err
	}
	if resp.ErrorCode != kerr.MemberIDRequired.Code {
		return fmt.Errorf("first join: %v, want MEMBER_ID_REQUIRED", kerr.ErrorForCode(resp.ErrorCode))
	}
	m.memberID = resp.MemberID
	return nil
}

// joinSync joins with the member id, syncs (the leader with a round-robin
// assignment of parts partitions) and retries on REBALANCE_IN_PROGRESS.
func (m *benchMember) joinSync(ctx context.Context, parts int32) error {
	for {
		jr, err := m.join(ctx)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(jr.ErrorCode); err != nil {
			return fmt.Errorf("join: %w", err)
		}
		m.gen, m.leader = jr.Generation, jr.LeaderID == m.memberID
		sreq := kmsg.NewPtrSyncGroupRequest()
		sreq.Group, sreq.Generation, sreq.MemberID = m.group, jr.Generation, m.memberID
		if m.leader {
			m.members = m.members[:0]
			for _, mb := range jr.Members {
				m.members = append(m.members, mb.MemberID)
			}
			sreq.GroupAssignment = benchRoundRobin(m.members, m.topic, parts)
		}
		sr, err := sreq.RequestWith(ctx, m.cl)
		if err != nil {
			return err
		}
		switch sr.ErrorCode {
		case 0:
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(sr.MemberAssignment); err != nil {
				return fmt.Errorf("sync: assignment: %w", err)
			}
			return nil
		case kerr.RebalanceInProgress.Code:
			continue
		default:
			return fmt.Errorf("sync: %w", kerr.ErrorForCode(sr.ErrorCode))
		}
	}
}

// heartbeat returns the heartbeat's error code.
func (m *benchMember) heartbeat(ctx context.Context) (int16, error) {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.Generation, req.MemberID = m.group, m.gen, m.memberID
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		return 0, err
	}
	return resp.ErrorCode, nil
}

func benchLeave(ctx context.Context, cl *kgo.Client, group string, ids ...string) error {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = group
	for _, id := range ids {
		mb := kmsg.NewLeaveGroupRequestMember()
		mb.MemberID = id
		req.Members = append(req.Members, mb)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	return nil
}

// benchRoundRobin assigns parts partitions of topic to the sorted members in turn.
func benchRoundRobin(members []string, topic string, parts int32) []kmsg.SyncGroupRequestGroupAssignment {
	ids := slices.Sorted(slices.Values(members))
	owned := make([][]int32, len(ids))
	for p := range parts {
		owned[int(p)%len(ids)] = append(owned[int(p)%len(ids)], p)
	}
	out := make([]kmsg.SyncGroupRequestGroupAssignment, len(ids))
	for i, id := range ids {
		a := kmsg.NewConsumerMemberAssignment()
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic, t.Partitions = topic, owned[i]
		a.Topics = append(a.Topics, t)
		out[i] = kmsg.NewSyncGroupRequestGroupAssignment()
		out[i].MemberID, out[i].MemberAssignment = id, a.AppendTo(nil)
	}
	return out
}

// benchEach runs fn for every member concurrently and returns the first error.
func benchEach(ms []*benchMember, fn func(*benchMember) error) error {
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() { errs[i] = fn(m) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// benchFormGroup takes ms from nothing to a Stable group: every member's handshake
// (first JoinGroup, MEMBER_ID_REQUIRED), then every member's JoinGroup with its id
// and SyncGroup. The handshakes all complete before the second joins start, so the
// join phase ends once, with every member (the broker holds it open while
// KIP-394 members are pending), whatever the goroutine scheduling.
func benchFormGroup(ctx context.Context, ms []*benchMember, parts int32) error {
	if err := benchEach(ms, func(m *benchMember) error { return m.handshake(ctx) }); err != nil {
		return err
	}
	return benchEach(ms, func(m *benchMember) error { return m.joinSync(ctx, parts) })
}

// BenchmarkRebalance measures a classic group of 20 raw members (each on its own
// connection) over a 200-partition topic, group.initial.rebalance.delay.ms 0:
//
//   - join20: first JoinGroup of a new group to the 20th SyncGroup response (one
//     generation: KIP-394 handshake, join, leader's round-robin assignment, sync);
//   - leave1: a member leaves (LeaveGroup) to the 19th SyncGroup response of the
//     remaining members, which send one Heartbeat each as soon as the LeaveGroup is
//     answered, get REBALANCE_IN_PROGRESS and rejoin. A real client notices at its
//     next heartbeat (3 s by default), which this leaves out.
//
// Each op uses a fresh group; the untimed setup and teardown form and empty it.
func BenchmarkRebalance(b *testing.B) {
	const topic, parts, size = "rebalance", 200, 20
	br, _ := benchBroker(b, topic, parts)
	ctx := context.Background()
	ms := make([]*benchMember, size)
	for i := range ms {
		ms[i] = &benchMember{cl: br.Client(b, kgo.ClientID(fmt.Sprintf("m%02d", i))), topic: topic}
	}
	var seq int
	newGroup := func() {
		seq++
		for _, m := range ms {
			m.group, m.memberID, m.gen, m.leader = fmt.Sprintf("rebalance-%d", seq), "", -1, false
		}
	}
	teardown := func() {
		var ids []string
		for _, m := range ms {
			if m.memberID != "" {
				ids = append(ids, m.memberID)
			}
		}
		if err := benchLeave(ctx, ms[0].cl, ms[0].group, ids...); err != nil {
			b.Fatal(err)
		}
	}
	// Warm up: coordinator lookups and connections of every client.
	newGroup()
	if err := benchFormGroup(ctx, ms, parts); err != nil {
		b.Fatal(err)
	}
	teardown()

	b.Run("join20", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			newGroup()
			b.StartTimer()
			if err := benchFormGroup(ctx, ms, parts); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			teardown()
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/rebalance")
	})

	b.Run("leave1", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			newGroup()
			if err := benchFormGroup(ctx, ms, parts); err != nil {
				b.Fatal(err)
			}
			// The leaver is a follower: the leader stays and assigns again.
			leaver := slices.IndexFunc(ms, func(m *benchMember) bool { return !m.leader })
			rest := slices.Delete(slices.Clone(ms), leaver, leaver+1)
			b.StartTimer()
			if err := benchLeave(ctx, ms[leaver].cl, ms[leaver].group, ms[leaver].memberID); err != nil {
				b.Fatal(err)
			}
			err := benchEach(rest, func(m *benchMember) error {
				code, err := m.heartbeat(ctx)
				if err != nil {
					return err
				}
				if code != kerr.RebalanceInProgress.Code {
					return fmt.Errorf("heartbeat after leave: %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(code))
				}
				return m.joinSync(ctx, parts)
			})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			ms[leaver].memberID = ""
			teardown()
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/rebalance")
	})
}
