package coordinator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestLoad(t *testing.T) {
	ctx := context.Background()
	l := NewLoad()
	if l.IsReady() || l.Failed() {
		t.Fatal("a load in progress is neither ready nor failed")
	}
	if e := l.Wait(ctx, time.Millisecond); e != kerr.CoordinatorLoadInProgress {
		t.Fatalf("still loading: %v", e)
	}
	done := make(chan *kerr.Error)
	go func() { done <- l.Wait(ctx, time.Minute) }()
	l.Done(nil)
	if e := <-done; e != nil || !l.IsReady() {
		t.Fatalf("after Done(nil): %v, ready %v", e, l.IsReady())
	}
	f := NewLoad()
	f.Done(errors.New("replay failed"))
	if e := f.Wait(ctx, time.Minute); e != kerr.CoordinatorNotAvailable || !f.Failed() || f.IsReady() {
		t.Fatalf("failed load: %v", e)
	}
	c, cancel := context.WithCancel(ctx)
	cancel()
	if n := NewLoad(); n.Wait(c, time.Minute) != kerr.CoordinatorLoadInProgress {
		t.Fatal("a cancelled wait did not answer COORDINATOR_LOAD_IN_PROGRESS")
	}
}
