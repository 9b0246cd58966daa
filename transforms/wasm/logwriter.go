package wasm

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

const (
	logLinesPerSecond = 20
	logBurst          = 40
	maxLogLine        = 1024
)

// logLimiter is a token bucket shared by a pool's instances: at most burst
// lines at once, refilled at rate lines per second. Lines over the limit are
// dropped and counted; the count is reported with the next line logged.
type logLimiter struct {
	mu      sync.Mutex
	rate    float64
	burst   float64
	tokens  float64
	last    time.Time
	dropped int
}

func newLogLimiter(rate, burst float64) *logLimiter {
	return &logLimiter{rate: rate, burst: burst, tokens: burst}
}

// allow reports whether a line may be logged now, and how many were dropped
// since the last line allowed.
func (l *logLimiter) allow() (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !l.last.IsZero() {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	}
	l.last = now
	if l.tokens < 1 {
		l.dropped++
		return false, 0
	}
	l.tokens--
	d := l.dropped
	l.dropped = 0
	return true, d
}

// lineWriter turns a guest's stdout or stderr into log lines: lines longer
// than maxLogLine are truncated, and lines are rate-limited. It is used by one
// instance's goroutine only.
type lineWriter struct {
	log       *slog.Logger
	lim       *logLimiter
	name      string
	stream    string
	buf       []byte
	truncated bool
}

func newLineWriter(log *slog.Logger, lim *logLimiter, name, stream string) *lineWriter {
	return &lineWriter{log: log, lim: lim, name: name, stream: stream}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := maxLogLine - len(w.buf); len(chunk) > room {
			chunk = chunk[:room]
			w.truncated = true
		}
		w.buf = append(w.buf, chunk...)
		if i < 0 {
			break
		}
		w.emit()
		p = p[i+1:]
	}
	return n, nil
}

// flush logs a final unterminated line.
func (w *lineWriter) flush() {
	if len(w.buf) > 0 || w.truncated {
		w.emit()
	}
}

func (w *lineWriter) emit() {
	line := strings.ToValidUTF8(string(w.buf), "\uFFFD")
	truncated := w.truncated
	w.buf = w.buf[:0]
	w.truncated = false
	ok, dropped := w.lim.allow()
	if !ok {
		return
	}
	attrs := []slog.Attr{slog.String("transform", w.name), slog.String("stream", w.stream)}
	if truncated {
		attrs = append(attrs, slog.Bool("truncated", true))
	}
	if dropped > 0 {
		attrs = append(attrs, slog.Int("dropped_lines", dropped))
	}
	w.log.LogAttrs(context.Background(), slog.LevelInfo, line, attrs...)
}
