package replication

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernel"
)

var tpA = kernel.TopicPartition{Topic: "a", Partition: 0}

func TestPurgatoryCompletesAtOnce(t *testing.T) {
	pg := newPurgatory()
	done, err := pg.wait(context.Background(), []kernel.TopicPartition{tpA}, time.Hour, func() bool { return true })
	if !done || err != nil {
		t.Fatalf("done=%v err=%v", done, err)
	}
	if pg.watching(tpA) != 0 {
		t.Fatal("a completed operation must not stay registered")
	}
}

func TestPurgatoryWakeOnChange(t *testing.T) {
	pg := newPurgatory()
	var ready atomic.Bool
	res := make(chan bool)
	go func() {
		done, _ := pg.wait(context.Background(), []kernel.TopicPartition{tpA, {Topic: "b"}}, time.Hour, ready.Load)
		res <- done
	}()
	waitFor(t, func() bool { return pg.watching(tpA) == 1 })
	pg.wake(kernel.TopicPartition{Topic: "other"}) // unrelated: no effect
	pg.wake(tpA)                                   // woken, condition still false
	ready.Store(true)
	pg.wake(tpA)
	select {
	case done := <-res:
		if !done {
			t.Fatal("not completed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("wake did not complete the operation")
	}
	if pg.watching(tpA) != 0 || pg.watching(kernel.TopicPartition{Topic: "b"}) != 0 {
		t.Fatal("watchers leaked")
	}
}

func TestPurgatoryTimeout(t *testing.T) {
	pg := newPurgatory()
	start := time.Now()
	done, err := pg.wait(context.Background(), []kernel.TopicPartition{tpA}, 20*time.Millisecond, func() bool { return false })
	if done || err != nil {
		t.Fatalf("done=%v err=%v", done, err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("returned after %v", d)
	}
}

func TestPurgatoryCancelAndStop(t *testing.T) {
	pg := newPurgatory()
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() {
		_, err := pg.wait(ctx, []kernel.TopicPartition{tpA}, time.Hour, func() bool { return false })
		errs <- err
	}()
	go func() {
		_, err := pg.wait(context.Background(), []kernel.TopicPartition{tpA}, time.Hour, func() bool { return false })
		errs <- err
	}()
	waitFor(t, func() bool { return pg.watching(tpA) == 2 })
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
	pg.close()
	if err := <-errs; !errors.Is(err, errStopped) {
		t.Fatalf("stop: %v", err)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	if err := pg.drain(dctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.wait(context.Background(), nil, time.Hour, func() bool { return false }); !errors.Is(err, errStopped) {
		t.Fatalf("wait after close: %v", err)
	}
}

// TestPurgatoryHammer: many waiters and wakers; no lost wake-ups, no leaks.
func TestPurgatoryHammer(t *testing.T) {
	before := runtime.NumGoroutine()
	pg := newPurgatory()
	var counter atomic.Int64
	const waiters, target = 16, 200
	var wg sync.WaitGroup
	for i := 0; i < waiters; i++ {
		wg.Go(func() {
			done, err := pg.wait(context.Background(), []kernel.TopicPartition{tpA}, time.Minute, func() bool { return counter.Load() >= target })
			if !done || err != nil {
				t.Errorf("done=%v err=%v", done, err)
			}
		})
	}
	for i := 0; i < 4; i++ {
		wg.Go(func() {
			for j := 0; j < target/4; j++ {
				counter.Add(1)
				pg.wake(tpA)
			}
		})
	}
	wg.Wait()
	if pg.watching(tpA) != 0 || pg.n.Load() != 0 {
		t.Fatal("watchers leaked")
	}
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before })
}

// receive waits up to d for a value from ch, failing the test with what if none comes.
func receive[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatal(what)
	}
	panic("unreachable")
}

// waitFor polls cond until it holds (never a fixed sleep as synchronisation).
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
