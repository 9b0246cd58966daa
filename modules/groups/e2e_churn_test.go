package groups_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// killSwitch is a kgo dialer whose connections can all be cut at once, after which
// every dial fails: the client is then a crashed process as the broker sees it (no
// LeaveGroup, no heartbeats, no commits), and the broker must expire its session.
type killSwitch struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

func (k *killSwitch) dial(ctx context.Context, network, host string) (net.Conn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead {
		return nil, errors.New("killed")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err == nil {
		k.conns = append(k.conns, c)
	}
	return c, err
}

func (k *killSwitch) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	for _, c := range k.conns {
		_ = c.Close()
	}
}

// crash cuts c's connections; the client is closed (without reaching the broker) in
// the background.
func (c *consumer) crash(k *killSwitch) {
	k.kill()
	c.cancel()
	<-c.done
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = c.cl.LeaveGroupContext(ctx)
		c.cl.Close()
	}()
}

// TestClassicChurn has members join, leave and crash while a producer writes: every
// acknowledged record is consumed at least once and the group's committed offsets
// never go backwards.
func TestClassicChurn(t *testing.T) {
	const topic, group, parts = "churn", "g-churn", 8
	b, adm := startWithTopic(t, fastGroupConfig, topic, parts)
	prod := startProducer(t, b, topic, parts)
	seen := newSeenSet()

	// Sample the committed offsets until the end; each must only grow.
	var (
		sampleMu   sync.Mutex
		high       = map[int32]int64{}
		backwards  []string
		samples    int
		stopSample = make(chan struct{})
		sampleDone = make(chan struct{})
	)
	go func() {
		defer close(sampleDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSample:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			offs, err := adm.FetchOffsets(ctx, group)
			cancel()
			if err != nil {
				continue
			}
			sampleMu.Lock()
			samples++
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Err != nil || o.Topic != topic {
					return
				}
				if prev, ok := high[o.Partition]; ok && o.At < prev {
					backwards = append(backwards, fmt.Sprintf("partition %d: %d after %d", o.Partition, o.At, prev))
				}
				high[o.Partition] = max(high[o.Partition], o.At)
			})
			sampleMu.Unlock()
		}
	}()

	opts := fastGroupOpts(group, topic)
	type member struct {
		c *consumer
		k *killSwitch
	}
	start := func(name string) member {
		k := &killSwitch{}
		return member{startConsumer(t, b, name, seen, append(opts, kgo.Dialer(k.dial))...), k}
	}
	progress := func(what string) {
		t.Helper()
		seen.mu.Lock()
		from := len(seen.seen)
		seen.mu.Unlock()
		waitFor(t, 10*time.Second, "consumption to progress after "+what, func() string {
			seen.mu.Lock()
			defer seen.mu.Unlock()
			if len(seen.seen) < from+100 {
				return fmt.Sprintf("%d new records", len(seen.seen)-from)
			}
			return ""
		})
	}

	m := []member{start("m0"), start("m1"), start("m2"), start("m3")}
	stableAssignment(t, adm, group, topic, parts, []*consumer{m[0].c, m[1].c, m[2].c, m[3].c})
	m[1].c.stop()
	progress("m1 left")
	m[2].c.crash(m[2].k)
	progress("m2 crashed")
	m4 := start("m4")
	progress("m4 joined")
	m[0].c.crash(m[0].k)
	m5 := start("m5")
	progress("m0 crashed, m5 joined")
	m[3].c.stop()
	progress("m3 left")
	survivors := []*consumer{m4.c, m5.c}
	stableAssignment(t, adm, group, topic, parts, survivors)

	acked := prod.Stop()
	seen.waitConsumed(t, 15*time.Second, acked)
	for _, c := range survivors {
		c.stop()
	}
	// The survivors committed on leaving; one more sample sees their final commits.
	sampleMu.Lock()
	last := samples
	sampleMu.Unlock()
	waitFor(t, 5*time.Second, "a sample after the last commits", func() string {
		sampleMu.Lock()
		defer sampleMu.Unlock()
		if samples < last+2 {
			return "no new sample yet"
		}
		return ""
	})
	close(stopSample)
	<-sampleDone
	sampleMu.Lock()
	defer sampleMu.Unlock()
	if len(backwards) > 0 {
		t.Errorf("committed offsets went backwards: %v", backwards)
	}
	if len(high) != parts {
		t.Errorf("offsets committed for %d partitions, want %d", len(high), parts)
	}
	t.Logf("%d records; %d offset samples; committed %s", len(acked), samples, fmtMap(high))
}

// TestClassicStaticMembership covers KIP-345 through kgo: a static member restarted
// within its session timeout gets its partitions back without a rebalance of the
// others, and a second live client with the same instance id fences the first.
func TestClassicStaticMembership(t *testing.T) {
	const topic, group, parts = "static", "g-static", 6
	b, adm := startWithTopic(t, fastGroupConfig, topic, parts)
	produceN(t, b.Client(t, kgo.DefaultProduceTopic(topic)), topic, 60)

	opts := append(fastGroupOpts(group, topic), kgo.SessionTimeout(8*time.Second), kgo.Balancers(kgo.RangeBalancer()))
	static := func(name, instance string) *consumer {
		return startConsumer(t, b, name, nil, append(opts, kgo.InstanceID(instance))...)
	}
	s1 := static("s1", "i1") // first member: the leader
	stableAssignment(t, adm, group, topic, parts, []*consumer{s1})
	s2 := static("s2", "i2")
	s3 := static("s3", "i3")
	before := stableAssignment(t, adm, group, topic, parts, []*consumer{s1, s2, s3})
	_, gen1 := s1.cl.GroupMetadata()
	_, gen2 := s2.cl.GroupMetadata()
	revokes := func(c *consumer) int { c.mu.Lock(); defer c.mu.Unlock(); return c.revokes }
	rev1, rev2 := revokes(s1), revokes(s2)

	// Restart s3: a static member's Close does not leave the group.
	s3.stop()
	s3b := static("s3b", "i3")
	after := stableAssignment(t, adm, group, topic, parts, []*consumer{s1, s2, s3b})
	if !slices.Equal(after["s3b"], before["s3"]) {
		t.Errorf("restarted static member got %v, had %v", after["s3b"], before["s3"])
	}
	if !slices.Equal(after["s1"], before["s1"]) || !slices.Equal(after["s2"], before["s2"]) {
		t.Errorf("other members' assignments changed: before %v, after %v", before, after)
	}
	if _, g := s1.cl.GroupMetadata(); g != gen1 {
		t.Errorf("s1 generation %d -> %d: the static restart caused a rebalance", gen1, g)
	}
	if _, g := s2.cl.GroupMetadata(); g != gen2 {
		t.Errorf("s2 generation %d -> %d: the static restart caused a rebalance", gen2, g)
	}
	if r1, r2 := revokes(s1), revokes(s2); r1 != rev1 || r2 != rev2 {
		t.Errorf("partitions revoked from the other members during a static restart (s1 %d->%d, s2 %d->%d)", rev1, r1, rev2, r2)
	}

	// A second live client with s2's instance id takes its place and fences s2.
	oldID, oldGen := s2.cl.GroupMetadata()
	s2b := static("s2b", "i2")
	waitFor(t, 10*time.Second, "s2b to take over instance i2", func() string {
		id, _ := s2b.cl.GroupMetadata()
		if id == "" || id == oldID {
			return "s2b has no member id yet"
		}
		return ""
	})
	// The old member id is fenced at the broker...
	rc := dialRaw(t, b.Addr, "raw")
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.Generation, hb.MemberID, hb.InstanceID = 4, group, oldGen, oldID, ptr("i2")
	if code := rc.do(hb).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.FencedInstanceID.Code {
		t.Errorf("heartbeat of the replaced static member: %v, want FENCED_INSTANCE_ID", kerr.ErrorForCode(code))
	}
	oc := commitReq(8, group, oldID, oldGen, topic, 0, nil)
	oc.InstanceID = ptr("i2")
	if code := commitCode(rc, oc); code != kerr.FencedInstanceID.Code {
		t.Errorf("commit of the replaced static member: %v, want FENCED_INSTANCE_ID", kerr.ErrorForCode(code))
	}
	// ...and s2 learns of it.
	waitFor(t, 10*time.Second, "s2 to see FENCED_INSTANCE_ID", func() string {
		s2.mu.Lock()
		defer s2.mu.Unlock()
		for _, err := range s2.fetchEr {
			if errors.Is(err, kerr.FencedInstanceID) {
				return ""
			}
		}
		return fmt.Sprintf("s2 errors: %v", s2.fetchEr)
	})
	s2.stop()
	s2b.stop()
}
