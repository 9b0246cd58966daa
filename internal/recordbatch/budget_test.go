package recordbatch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ValidateBudget agrees with Validate on every codec, and leaves the budget empty.
func TestValidateBudgetMatchesValidate(t *testing.T) {
	b := NewDecompressBudget(64 << 20)
	for _, c := range codecCases {
		t.Run(c.name, func(t *testing.T) {
			for _, n := range []int{1, 50, 5000} {
				batch := Build(opts(c), sampleRecords(n, 100)...)
				want, err := Validate(batch)
				if err != nil {
					t.Fatal(err)
				}
				got, err := ValidateBudget(context.Background(), batch, b)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("ValidateBudget = %+v, Validate = %+v", got, want)
				}
			}
			if u := b.InUse(); u != 0 {
				t.Fatalf("%d bytes still reserved", u)
			}
		})
	}
}

// Concurrent bombs, each within the per-batch limit, never hold more than the budget
// between them; each either passes or waits its turn, and a bomb that inflates past
// the whole budget fails ErrTooLarge instead of waiting forever.
func TestValidateBudgetBombs(t *testing.T) {
	const budget = 4 << 20
	b := NewDecompressBudget(budget)
	var peak atomic.Int64
	stop := make(chan struct{})
	go func() { // sample the reservation while the bombs run
		for {
			select {
			case <-stop:
				return
			default:
			}
			if u := b.InUse(); u > peak.Load() {
				peak.Store(u)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	for _, c := range codecCases[1:] {
		fits := Build(opts(c), Record{Value: make([]byte, 1<<20+1<<19)})
		over := Build(opts(c), Record{Value: make([]byte, 5<<20)})
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if i%4 == 3 {
					if _, err := ValidateBudget(ctx, over, b); !errors.Is(err, ErrTooLarge) {
						t.Errorf("%s: bomb over the budget: %v", c.name, err)
					}
					return
				}
				if _, err := ValidateBudget(ctx, fits, b); err != nil {
					t.Errorf("%s: %v", c.name, err)
				}
			}()
		}
		wg.Wait()
	}
	close(stop)
	if p := peak.Load(); p > budget {
		t.Fatalf("peak reservation %d, budget %d", p, budget)
	}
	if u := b.InUse(); u != 0 {
		t.Fatalf("%d bytes still reserved", u)
	}
}

// A batch that cannot get room before its context ends fails ErrBudget (not
// ErrCorrupt: the batch itself is fine).
func TestValidateBudgetWaitBounded(t *testing.T) {
	b := NewDecompressBudget(1 << 20)
	if err := b.acquire(context.Background(), 1<<20); err != nil {
		t.Fatal(err)
	}
	batch := Build(opts(codecCases[1]), sampleRecords(10, 10)...)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := ValidateBudget(ctx, batch, b)
	if !errors.Is(err, ErrBudget) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrBudget", err)
	}
	b.release(1 << 20)
	if _, err := ValidateBudget(context.Background(), batch, b); err != nil {
		t.Fatal(err)
	}
}
