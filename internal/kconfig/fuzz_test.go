package kconfig

import (
	"errors"
	"testing"
)

// FuzzValidateTopic: validation never panics, refuses with the right sentinel, and a
// value it accepts is the one resolution then uses (as its canonical form).
func FuzzValidateTopic(f *testing.F) {
	for _, seed := range []struct{ name, value string }{
		{"retention.ms", ""}, {"retention.ms", "-1"}, {"retention.ms", "9223372036854775808"},
		{"segment.bytes", "14"}, {"cleanup.policy", "compact, delete"}, {"cleanup.policy", ","},
		{"min.cleanable.dirty.ratio", "1e-300"}, {"min.cleanable.dirty.ratio", "0x1p-2"},
		{"unclean.leader.election.enable", "TrUe"}, {"leader.replication.throttled.replicas", "0:1,*"},
		{"message.timestamp.type", "LogAppendTime"}, {"no.such", "1"},
	} {
		f.Add(seed.name, seed.value)
	}
	f.Fuzz(func(t *testing.T, name, raw string) {
		err := ValidateTopic(name, raw)
		if !IsTopicConfig(name) {
			if !errors.Is(err, ErrUnknownConfig) {
				t.Fatalf("unknown %q: %v", name, err)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidValue) {
				t.Fatalf("%s=%q: %v", name, raw, err)
			}
			return
		}
		e := entry(t, DescribeTopic(map[string]string{name: raw}, nil, nil, nil), name)
		if e.Source != SourceDynamicTopic {
			t.Fatalf("%s=%q accepted but not used: source %s", name, raw, e.Source)
		}
		// The canonical form is itself valid and stable.
		if err := ValidateTopic(name, *e.Value); err != nil {
			t.Fatalf("%s: canonical %q of %q refused: %v", name, *e.Value, raw, err)
		}
		e2 := entry(t, DescribeTopic(map[string]string{name: *e.Value}, nil, nil, nil), name)
		if *e2.Value != *e.Value {
			t.Fatalf("%s: canonical form not stable: %q -> %q", name, *e.Value, *e2.Value)
		}
	})
}

// FuzzValidateBroker: validation never panics and refuses with the right sentinel.
func FuzzValidateBroker(f *testing.F) {
	f.Add("log.retention.ms", "-1")
	f.Add("num.partitions", "3")
	f.Add("ssl.keystore.password", "x")
	f.Add("log.cleanup.policy", "compact")
	f.Fuzz(func(t *testing.T, name, raw string) {
		err := ValidateBroker(name, raw)
		switch {
		case !IsBrokerConfig(name):
			if !errors.Is(err, ErrUnknownConfig) {
				t.Fatalf("unknown %q: %v", name, err)
			}
		case !IsDynamicBrokerConfig(name):
			if !errors.Is(err, ErrReadOnly) {
				t.Fatalf("read-only %q: %v", name, err)
			}
		case err != nil && !errors.Is(err, ErrInvalidValue):
			t.Fatalf("%s=%q: %v", name, raw, err)
		case err == nil:
			if ValidateStaticBroker(name, raw) != nil {
				t.Fatalf("%s=%q valid dynamically but not statically", name, raw)
			}
			merged := MergeBroker(nil, nil, map[string]string{name: raw})
			if merged[name] != raw {
				t.Fatalf("%s=%q valid but dropped by MergeBroker", name, raw)
			}
		}
	})
}
