// Package ratelog bounds how often a log line repeats: a Limiter lets through at most N
// lines per window and counts the rest, so that the next line let through can say how
// many were dropped. Bad input and failing resources log through one, never per event.
package ratelog

import (
	"sync"
	"time"
)

// Limiter lets through at most N lines per window of Every (default one second). The
// zero value with N set is ready to use; a Limiter must not be copied after first use.
type Limiter struct {
	N     int
	Every time.Duration

	mu      sync.Mutex
	window  time.Time // start of the current window
	used    int       // lines let through in it
	dropped int       // lines refused since the last one let through
}

// Allow reports whether a line may be logged now and, when it may, how many were
// dropped before it.
func (l *Limiter) Allow(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	every := l.Every
	if every <= 0 {
		every = time.Second
	}
	if now.Sub(l.window) >= every {
		l.window, l.used = now, 0
	}
	if l.used >= l.N {
		l.dropped++
		return false, 0
	}
	l.used++
	d := l.dropped
	l.dropped = 0
	return true, d
}
