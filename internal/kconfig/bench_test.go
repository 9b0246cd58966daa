package kconfig

import "testing"

func BenchmarkResolveTopic(b *testing.B) {
	overrides := map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"}
	broker := MergeBroker(map[string]string{"log.retention.hours": "24", "log.segment.bytes": "1048576"}, nil, nil)
	b.ReportAllocs()
	for b.Loop() {
		ResolveTopic(overrides, broker)
	}
}

func BenchmarkDescribeTopic(b *testing.B) {
	overrides := map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"}
	static := map[string]string{"log.retention.hours": "24", "log.segment.bytes": "1048576"}
	b.ReportAllocs()
	for b.Loop() {
		DescribeTopic(overrides, static, nil, nil)
	}
}
