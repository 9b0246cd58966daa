package testbroker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/kernel"
)

// WaitFor polls cond every 20ms until it returns "" (done) or timeout passes; it then
// fails the test with the last reason cond gave.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RetryCoordinator runs op until it stops failing with a retriable coordinator error
// (a fenced transaction still aborting, a coordinator still loading or moving) and
// returns its last error; it fails the test if ctx ends first.
func RetryCoordinator(t testing.TB, ctx context.Context, what string, op func() error) error {
	t.Helper()
	for {
		err := op()
		if err == nil || !(errors.Is(err, kerr.ConcurrentTransactions) || errors.Is(err, kerr.CoordinatorLoadInProgress) ||
			errors.Is(err, kernel.ErrNotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable)) {
			return err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: still failing at the deadline: %v", what, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ProduceFlush produces n records of value through cl's default topic, done seeing
// each result, and waits until all are acknowledged; a failed Flush fails the test.
func ProduceFlush(t testing.TB, ctx context.Context, cl *kgo.Client, n int, value []byte, done func(*kgo.Record, error)) {
	t.Helper()
	for range n {
		cl.Produce(ctx, &kgo.Record{Value: value}, done)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// ExpectExactlyOnce checks that topic holds every value of acked once and nothing
// else: its end offsets sum to len(acked) (the topic has no other records), and a
// consumer from the start, seeded with seeds, reads each value exactly once.
func ExpectExactlyOnce(t testing.TB, ctx context.Context, seeds []string, topic string, acked map[string]bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != int64(len(acked)) {
		t.Fatalf("%d records in %s, %d acknowledged", total, topic, len(acked))
	}
	seen := map[string]bool{}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(seen) < len(acked) && cctx.Err() == nil {
		cl.PollFetches(cctx).EachRecord(func(r *kgo.Record) {
			if seen[string(r.Value)] {
				t.Fatalf("record %s twice", r.Value)
			}
			seen[string(r.Value)] = true
		})
	}
	for v := range acked {
		if !seen[v] {
			t.Fatalf("acknowledged record %s lost", v)
		}
	}
}
