package replication

import (
	"math"
	"testing"
	"time"
)

func TestThrottledReplica(t *testing.T) {
	for _, c := range []struct {
		list      string
		partition int32
		broker    int32
		want      bool
	}{
		{"", 0, 1, false},
		{"*", 7, 3, true},
		{"0:1", 0, 1, true},
		{"0:1", 0, 2, false},
		{"0:1", 1, 1, false},
		{"0:1,1:2,10:3", 10, 3, true},
		{"0:1,1:2,10:3", 1, 3, false},
		{"0:1, 1:2", 1, 2, true},  // spaces around entries
		{"x:1,1:2", 1, 2, true},   // a malformed entry is skipped, not fatal
		{"1:2:3,1:2", 1, 2, true}, // so is one with extra colons
		{"2147483648:1", 0, 1, false},
	} {
		if got := throttledReplica(c.list, c.partition, c.broker); got != c.want {
			t.Errorf("throttledReplica(%q, %d, %d) = %v, want %v", c.list, c.partition, c.broker, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { throttledReplica("0:1,1:2,2:3,3:4", 3, 4) }); n != 0 {
		t.Errorf("throttledReplica allocates %v times", n)
	}
}

func TestReplicationRate(t *testing.T) {
	if r := replicationRate(math.MaxInt64); r != 0 {
		t.Errorf("the default rate is a limit: %v", r)
	}
	if r := replicationRate(1 << 20); r != 1<<20 {
		t.Errorf("1 MiB/s is %v", r)
	}
	// 0 stops throttled replication: any byte is over it.
	rc := &replicaConfig{leaderRate: replicationRate(0)}
	var th replThrottle
	now := time.Now()
	if d := th.over(leaderSide, rc, now); d != 0 {
		t.Errorf("over before anything was sent: %v", d)
	}
	th.record(leaderSide, rc, 1, now)
	if d := th.over(leaderSide, rc, now); d <= 0 {
		t.Error("a rate of 0 lets bytes through")
	}
	// The follower side has no limit: nothing is recorded, nothing is over.
	th.record(followerSide, rc, 1<<30, now)
	if d := th.over(followerSide, rc, now); d != 0 || th.rate(followerSide, rc, now) != 0 {
		t.Errorf("an unlimited side is throttled (%v) or measured", d)
	}
}
