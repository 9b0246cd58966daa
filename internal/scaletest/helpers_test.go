//go:build linux

package scaletest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// createTopics creates names, partitions each with replication factor rf, in one
// CreateTopics request; it fails the test unless every one was created, and returns
// how long the request took.
func createTopics(ctx context.Context, t *testing.T, adm *kadm.Client, partitions int32, rf int16, names []string) time.Duration {
	t.Helper()
	start := time.Now()
	resp, err := adm.CreateTopics(ctx, partitions, rf, nil, names...)
	if err != nil {
		t.Fatalf("CreateTopics: %v", err)
	}
	took := time.Since(start)
	if len(resp) != len(names) {
		t.Fatalf("CreateTopics answered %d topics, want %d", len(resp), len(names))
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			t.Fatalf("create %s: %v", r.Topic, r.Err)
		}
	}
	return took
}

// produceEach produces every record and waits for all their acks; it fails the test
// if any failed (what names the round), and returns how long that took.
func produceEach(ctx context.Context, t *testing.T, cl *kgo.Client, what string, recs []*kgo.Record) time.Duration {
	t.Helper()
	begin := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	for _, r := range recs {
		wg.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil && failed.Add(1) == 1 {
				firstErr.Store(err.Error())
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%s: %d of %d produces failed, first: %v", what, n, len(recs), firstErr.Load())
	}
	return time.Since(begin)
}
