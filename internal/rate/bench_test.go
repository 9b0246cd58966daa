package rate

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// One sensor, a record every 100 µs of fake time (samples roll every 10,000 ops).
func BenchmarkSensorRecordAndThrottle(b *testing.B) {
	s := NewSensor(Config{})
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(100 * time.Microsecond)
		s.RecordAndThrottle(1000, 5e6, now)
	}
}

// RecordAndThrottle from every P over 64 existing keys.
func BenchmarkSensorsParallel(b *testing.B) {
	m := NewSensors[string](Config{}, 0)
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprint("client-", i)
		m.RecordAndThrottle(keys[i], 1, 5e6, t0)
	}
	var seed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seed.Add(1)) * 17
		now := t0
		for pb.Next() {
			i++
			now = now.Add(100 * time.Microsecond)
			m.RecordAndThrottle(keys[i%len(keys)], 1000, 5e6, now)
		}
	})
}

func BenchmarkTokenBucketAdmit(b *testing.B) {
	tb := NewTokenBucket(Config{})
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		tb.Admit(1, 1000, now)
	}
}
