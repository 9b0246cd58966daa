package groups

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
)

func TestShareSessions(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := newShareSessions(2, time.Minute)
	a, b, x := shareSessionKey{"g", "a"}, shareSessionKey{"g", "b"}, shareSessionKey{"g", "x"}
	tp := func(p int32) kernel.TopicPartition { return kernel.TopicPartition{Topic: "t", Partition: p} }
	if _, _, e := c.use(a, 1, t0); e != kerr.ShareSessionNotFound {
		t.Fatalf("no session: %v", e)
	}
	if old, closing, e := c.use(a, 0, t0); e != nil || old != nil || closing {
		t.Fatalf("open: %v %v %v", old, closing, e)
	}
	if got := c.update(a, []kernel.TopicPartition{tp(0), tp(1)}, nil); len(got) != 2 {
		t.Fatalf("update: %v", got)
	}
	if _, _, e := c.use(a, 2, t0); e != kerr.InvalidShareSessionEpoch {
		t.Fatalf("epoch 2 before 1: %v", e)
	}
	if old, _, e := c.use(a, 1, t0); e != nil || len(old) != 2 {
		t.Fatalf("epoch 1: %v %v", old, e)
	}
	if got := c.update(a, nil, []kernel.TopicPartition{tp(0)}); len(got) != 1 {
		t.Fatalf("forget: %v", got)
	}
	if _, _, e := c.use(a, 1, t0); e != kerr.InvalidShareSessionEpoch {
		t.Fatalf("epoch 1 again: %v", e)
	}
	// Reopening returns the replaced session's partitions for release.
	if old, _, e := c.use(a, 0, t0); e != nil || len(old) != 1 {
		t.Fatalf("reopen: %v %v", old, e)
	}
	if _, _, e := c.use(b, 0, t0); e != nil {
		t.Fatal(e)
	}
	if _, _, e := c.use(x, 0, t0.Add(time.Second)); e != kerr.ShareSessionLimitReached {
		t.Fatalf("over the limit: %v", e)
	}
	// An idle session (b; a was used since) makes room.
	if _, _, e := c.use(a, 1, t0.Add(90*time.Second)); e != nil {
		t.Fatal(e)
	}
	if _, _, e := c.use(x, 0, t0.Add(2*time.Minute)); e != nil {
		t.Fatalf("with an idle session: %v", e)
	}
	if c.count() != 2 {
		t.Fatalf("count %d", c.count())
	}
	if old, closing, e := c.use(x, -1, t0.Add(2*time.Minute)); e != nil || !closing || old == nil {
		t.Fatalf("close: %v %v %v", old, closing, e)
	}
	if _, _, e := c.use(x, 1, t0.Add(2*time.Minute)); e != kerr.ShareSessionNotFound {
		t.Fatalf("after close: %v", e)
	}
	if _, _, e := c.use(b, 1, t0.Add(2*time.Minute)); e != kerr.ShareSessionNotFound {
		t.Fatalf("b was evicted: %v", e)
	}
	c.update(a, []kernel.TopicPartition{tp(3)}, nil)
	gone := c.expire(t0.Add(10 * time.Minute))
	if len(gone) != 1 || len(gone[a]) != 1 || c.count() != 0 {
		t.Fatalf("expire: %v, %d left", gone, c.count())
	}
}
