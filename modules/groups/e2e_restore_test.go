package groups_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// restoreMember is a kgo group member that counts rebalance callbacks and group
// errors on commits, and records every value it consumes.
type restoreMember struct {
	*poller

	mu                      sync.Mutex
	assigned, revoked, lost int
	commitErrs              []error
	seen                    map[string]int // value -> times consumed (by this member)
	restartedAt             time.Time
	okCommitsAfter          int
}

func startRestoreMember(t *testing.T, b *testbroker.Broker, name, group, topic string) *restoreMember {
	t.Helper()
	m := &restoreMember{seen: map[string]int{}}
	opts := append(fastGroupOpts(group, topic),
		// A session long enough for the members to reconnect to a restarted broker
		// on a loaded 2-core CI machine (2s flaked there), short enough to wait out.
		kgo.SessionTimeout(restoreSession),
		// fastGroupOpts' 50ms backoff leaves kgo about 1s of retries for a heartbeat
		// answered NOT_COORDINATOR while the restarted broker loads the partition;
		// past that kgo drops its session and rejoins, which is the rebalance this
		// test must not see. Real clients retry for longer.
		kgo.RequestRetries(200),
		kgo.SeedBrokers(b.Addr),
		kgo.ClientID(name),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			m.mu.Lock()
			m.assigned++
			m.mu.Unlock()
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			_ = cl.CommitUncommittedOffsets(ctx)
			m.mu.Lock()
			m.revoked++
			m.mu.Unlock()
		}),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) {
			m.mu.Lock()
			m.lost++
			m.mu.Unlock()
		}),
		kgo.AutoCommitCallback(func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			var groupErr error
			if resp != nil {
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						if e := kerr.ErrorForCode(rp.ErrorCode); e != nil {
							groupErr = e
						}
					}
				}
			}
			switch {
			case errors.Is(groupErr, kerr.IllegalGeneration), errors.Is(groupErr, kerr.UnknownMemberID),
				errors.Is(groupErr, kerr.RebalanceInProgress), errors.Is(groupErr, kerr.FencedInstanceID):
				m.commitErrs = append(m.commitErrs, groupErr)
			case err == nil && groupErr == nil && !m.restartedAt.IsZero():
				m.okCommitsAfter++
			}
		}),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	m.poller = startPolling(t, cl, func(fs kgo.Fetches) {
		fs.EachRecord(func(r *kgo.Record) {
			m.mu.Lock()
			m.seen[string(r.Value)]++
			m.mu.Unlock()
		})
	})
	return m
}

// consumedBy counts how many times the members of ms consumed each value.
func consumedBy(ms []*restoreMember) map[string]int {
	total := map[string]int{}
	for _, m := range ms {
		m.mu.Lock()
		for v, c := range m.seen {
			total[v] += c
		}
		m.mu.Unlock()
	}
	return total
}

func (m *restoreMember) counts() (assigned, revoked, lost int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.assigned, m.revoked, m.lost
}

// A graceful broker restart under a Stable classic group restores the group from its
// metadata record: the members keep their member ids, generation and partitions (no
// revoke, no loss), their heartbeats and commits keep succeeding, and no record is
// consumed twice.
// restoreSession is the members' session timeout in TestRestartRestoresClassicGroup.
const restoreSession = 6 * time.Second

func TestRestartRestoresClassicGroup(t *testing.T) {
	const (
		group = "g-restore"
		topic = "restore"
		parts = 4
	)
	b, adm := startWithTopic(t, fastGroupConfig, topic, parts)
	prod := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	next := 0
	produce := func(n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var rs []*kgo.Record
		for range n {
			rs = append(rs, &kgo.Record{Value: []byte(strconv.Itoa(next)), Partition: int32(next % parts)})
			next++
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	ms := []*restoreMember{
		startRestoreMember(t, b, "m1", group, topic),
		startRestoreMember(t, b, "m2", group, topic),
	}
	seenAll := func(n int) string {
		if total := consumedBy(ms); len(total) < n {
			return fmt.Sprintf("%d of %d records consumed", len(total), n)
		}
		return ""
	}
	// Both members Stable with two partitions each, and consuming.
	waitFor(t, 20*time.Second, "two members, each with partitions", func() string {
		for i, m := range ms {
			if a, _, _ := m.counts(); a == 0 {
				return fmt.Sprintf("m%d has no assignment", i+1)
			}
		}
		d, err := describeGroup(adm, group, 5*time.Second)
		if err != nil {
			return err.Error()
		}
		if d.State != "Stable" || len(d.Members) != 2 {
			return fmt.Sprintf("%s with %d members", d.State, len(d.Members))
		}
		for _, dm := range d.Members {
			ca, _ := dm.Assigned.AsConsumer()
			if ca == nil || len(ca.Topics) == 0 || len(ca.Topics[0].Partitions) != parts/2 {
				return fmt.Sprintf("member %s assigned %v", dm.MemberID, ca)
			}
		}
		return ""
	})
	produce(200)
	waitFor(t, 20*time.Second, "first records consumed", func() string { return seenAll(200) })
	time.Sleep(500 * time.Millisecond) // a few auto-commits and heartbeats
	type ident struct {
		member string
		gen    int32
	}
	before := make([]ident, len(ms))
	beforeCounts := make([][3]int, len(ms))
	for i, m := range ms {
		before[i].member, before[i].gen = m.cl.GroupMetadata()
		a, r, l := m.counts()
		beforeCounts[i] = [3]int{a, r, l}
	}

	b.Restart(t)
	for _, m := range ms {
		m.mu.Lock()
		m.restartedAt = time.Now()
		m.mu.Unlock()
	}
	adm = b.Admin(t)
	produce(200)
	waitFor(t, 30*time.Second, "records after the restart consumed", func() string { return seenAll(400) })
	// Longer than the session timeout: members that were not heard from would have
	// expired and the group would have rebalanced.
	time.Sleep(restoreSession + 500*time.Millisecond)
	waitFor(t, 10*time.Second, "commits after the restart", func() string {
		for i, m := range ms {
			m.mu.Lock()
			ok := m.okCommitsAfter
			m.mu.Unlock()
			if ok == 0 {
				id, gen := m.cl.GroupMetadata()
				a, r, l := m.counts()
				return fmt.Sprintf("m%d: no successful commit since the restart (member %s gen %d, assigned/revoked/lost %d/%d/%d, group errors %v)",
					i+1, id, gen, a, r, l, m.commitErrs)
			}
		}
		return ""
	})

	for i, m := range ms {
		// The member ids prove the restore: a coordinator that forgot the group
		// answers UNKNOWN_MEMBER_ID and kgo rejoins under a new id. The generation
		// may move: when the restart window is long (a loaded machine), kgo gives
		// up heartbeating on dial errors and rejoins under its old id, and a
		// leader's rejoin is a rebalance, with Kafka too.
		id, gen := m.cl.GroupMetadata()
		if id != before[i].member {
			t.Errorf("m%d: member %s after restart, was %s", i+1, id, before[i].member)
		}
		a, r, l := m.counts()
		if gen != before[i].gen || [3]int{a, r, l} != beforeCounts[i] {
			t.Logf("m%d: rejoined: gen %d (was %d), assigned/revoked/lost %v (was %v)", i+1, gen, before[i].gen, [3]int{a, r, l}, beforeCounts[i])
		}
		m.mu.Lock()
		if len(m.commitErrs) > 0 {
			t.Errorf("m%d: commits failed with group errors: %v", i+1, m.commitErrs)
		}
		m.mu.Unlock()
	}
	d, err := describeGroup(adm, group, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, dm := range d.Members {
		got[dm.MemberID] = true
	}
	if d.State != "Stable" || len(got) != 2 || !got[before[0].member] || !got[before[1].member] {
		t.Errorf("after restart: %s with members %v, want Stable with %v", d.State, got, before)
	}
	// Committed offsets reach the end: the commits after the restart were accepted.
	waitFor(t, 10*time.Second, "committed offsets at the end", func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err.Error()
		}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err.Error()
		}
		var lag []string
		ends.Each(func(o kadm.ListedOffset) {
			if c, ok := offs.Lookup(topic, o.Partition); !ok || c.At != o.Offset {
				lag = append(lag, fmt.Sprintf("p%d committed %d of %d", o.Partition, c.At, o.Offset))
			}
		})
		if len(lag) > 0 {
			return fmt.Sprint(lag)
		}
		return ""
	})
	// No record consumed twice, by the same member or by both.
	total := consumedBy(ms)
	dups := 0
	for v, c := range total {
		if c > 1 {
			dups++
			if dups <= 5 {
				t.Errorf("record %s consumed %d times", v, c)
			}
		}
	}
	if dups > 0 {
		t.Errorf("%d of %d records consumed more than once", dups, len(total))
	}
}
