package ratelog

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	l := Limiter{N: 3, Every: 10 * time.Second}
	now := time.Unix(1_000_000, 0)
	for i := range 3 {
		if ok, _ := l.Allow(now); !ok {
			t.Fatalf("line %d refused within the burst", i)
		}
	}
	for i := range 5 {
		if ok, _ := l.Allow(now.Add(time.Duration(i) * time.Second)); ok {
			t.Fatalf("line %d past the burst let through", i)
		}
	}
	if ok, dropped := l.Allow(now.Add(10 * time.Second)); !ok || dropped != 5 {
		t.Fatalf("next window: ok %v, dropped %d; want true, 5", ok, dropped)
	}
	if ok, dropped := l.Allow(now.Add(10 * time.Second)); !ok || dropped != 0 {
		t.Fatalf("after the report: ok %v, dropped %d; want true, 0", ok, dropped)
	}
}

func TestLimiterDefaultWindow(t *testing.T) {
	l := Limiter{N: 1}
	now := time.Unix(1_000_000, 0)
	if ok, _ := l.Allow(now); !ok {
		t.Fatal("first line refused")
	}
	if ok, _ := l.Allow(now.Add(999 * time.Millisecond)); ok {
		t.Fatal("second line within a second let through")
	}
	if ok, dropped := l.Allow(now.Add(time.Second)); !ok || dropped != 1 {
		t.Fatalf("after a second: ok %v, dropped %d; want true, 1", ok, dropped)
	}
}
