package interop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCrashGroupCommits commits offsets for a group from 8 goroutines (one per partition,
// each committing 1, 2, 3, ... with metadata naming the offset, through kadm's
// OffsetCommit), SIGKILLs the broker once 200 commits are acknowledged while the
// goroutines are still committing, restarts it on the same data dir and checks every
// partition's committed offset: at least the last acknowledged commit, at most the last
// one sent, with the metadata sent with it. ListGroups and DescribeGroups must still know
// the group. Then a second kill, with the broker idle, and the same check.
func TestCrashGroupCommits(t *testing.T) {
	t.Parallel()
	b := startBrokerConfig(t, groupBrokerConfig)
	const (
		topic      = "crash-commits"
		group      = "crash-commits-g"
		partitions = 8
		killAfter  = 200 // acknowledged commits before the kill
	)
	createTopic(t, b.addr, topic, partitions)
	produceSeq(t, b.addr, topic, partitions, "rec", 8*100)

	var (
		mu                 sync.Mutex
		sent, acked        [partitions]int64 // last offset sent / acknowledged per partition
		nAcked             int
		killed             bool
		preKillErr         error
		postKillFailures   int
		firstPostKillError error
	)
	cl := newClient(t, b.addr, kgo.RetryTimeout(2*time.Second))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for p := int32(0); p < partitions; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := int64(1); ctx.Err() == nil; off++ {
				mu.Lock()
				sent[p] = off
				mu.Unlock()
				var os kadm.Offsets
				os.Add(kadm.Offset{Topic: topic, Partition: p, At: off, LeaderEpoch: -1, Metadata: fmt.Sprintf("v%d", off)})
				rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
				resp, err := adm.CommitOffsets(rctx, group, os)
				rcancel()
				if err == nil {
					err = resp.Error()
				}
				mu.Lock()
				if err != nil {
					if killed {
						postKillFailures++
						if firstPostKillError == nil {
							firstPostKillError = err
						}
					} else if preKillErr == nil && !errors.Is(err, context.Canceled) {
						preKillErr = fmt.Errorf("partition %d offset %d: %w", p, off, err)
					}
					mu.Unlock()
					return
				}
				acked[p] = off
				nAcked++
				mu.Unlock()
			}
		}()
	}
	ok := pollUntil(30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return nAcked >= killAfter || preKillErr != nil
	})
	mu.Lock()
	killed = true
	mu.Unlock()
	if ok && preKillErr == nil {
		b.kill()
	}
	cancel()
	wg.Wait()
	cl.Close()
	if !ok || preKillErr != nil {
		t.Fatalf("only %d commits acknowledged within 30s; first error: %v", nAcked, preKillErr)
	}
	t.Logf("SIGKILL after %d acknowledged commits; %d commits in flight failed (first: %v); last sent %v, last acknowledged %v",
		nAcked, postKillFailures, firstPostKillError, sent, acked)

	check := func(when string) {
		t.Helper()
		adm := kadm.NewClient(newClient(t, b.addr))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		os, err := answerErr(adm.FetchOffsets(ctx, group))
		if err != nil {
			t.Fatalf("%s: FetchOffsets %s: %v", when, group, err)
		}
		for p := int32(0); p < partitions; p++ {
			o, found := os.Lookup(topic, p)
			switch {
			case !found:
				t.Errorf("%s: partition %d: no committed offset (last acknowledged %d)", when, p, acked[p])
			case o.At < acked[p] || o.At > sent[p]:
				t.Errorf("%s: partition %d: committed %d, want between the last acknowledged commit %d and the last sent %d",
					when, p, o.At, acked[p], sent[p])
			case o.Metadata != fmt.Sprintf("v%d", o.At):
				t.Errorf("%s: partition %d: committed %d with metadata %q, want %q", when, p, o.At, o.Metadata, fmt.Sprintf("v%d", o.At))
			}
		}
		ls, err := adm.ListGroups(ctx)
		if err != nil {
			t.Fatalf("%s: ListGroups: %v", when, err)
		}
		if l, found := ls[group]; !found || l.State != "Empty" {
			t.Errorf("%s: ListGroups: %s is %+v (listed: %v), want it listed as Empty", when, group, l, found)
		}
		if d := describeGroup(t, adm, group); d.State != "Empty" || len(d.Members) != 0 {
			t.Errorf("%s: DescribeGroups %s: state %q, %d members; want Empty", when, group, d.State, len(d.Members))
		}
	}
	b.start()
	check("after SIGKILL mid-commit")
	first, err := committed(kadm.NewClient(newClient(t, b.addr)), group, topic)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the restart: committed %v", first)

	// Idle kill: what the restart replayed must survive the next replay unchanged.
	b.kill()
	b.start()
	again, err := committed(kadm.NewClient(newClient(t, b.addr)), group, topic)
	if err != nil {
		t.Fatalf("after an idle SIGKILL: FetchOffsets: %v", err)
	}
	if !mapsEqual(first, again) {
		t.Errorf("after an idle SIGKILL: committed %v, before it %v", again, first)
	}
	check("after an idle SIGKILL")
}
