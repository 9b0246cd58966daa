package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Nonsense flags are refused before anything connects: exit 2 and a message naming the
// flag. The brokers in these cases point at a port nothing listens on, so a case that
// wrongly got past validation fails on the exit code (1, connection refused) or hangs
// into the test's deadline.
func TestRefusesNonsenseFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"no command", nil, "usage: sluice-bench"},
		{"unknown command", []string{"bench"}, `unknown command "bench"`},
		{"unknown flag", []string{"produce", "--recrods", "5"}, "flag provided but not defined: -recrods"},
		{"positional", []string{"produce", "extra"}, "unexpected arguments"},
		{"negative record size", []string{"produce", "--record-size", "-1"}, "--record-size -1"},
		{"huge record size", []string{"produce", "--record-size", "1000000000"}, "--record-size 1000000000"},
		{"negative records", []string{"produce", "--records", "-5"}, "--records -5"},
		{"zero records", []string{"consume", "--records", "0"}, "--records 0"},
		{"bad acks", []string{"produce", "--acks", "2"}, `--acks "2"`},
		{"bad compression", []string{"produce", "--compression", "brotli"}, `compression "brotli"`},
		{"bad idempotence", []string{"produce", "--idempotence", "maybe"}, `--idempotence "maybe"`},
		{"idempotence without acks all", []string{"produce", "--acks", "1", "--idempotence", "on"}, "needs --acks all"},
		{"negative linger", []string{"produce", "--linger", "-1ms"}, "--linger -1ms"},
		{"batch below one record", []string{"produce", "--record-size", "1024", "--batch-size", "1000"}, "--batch-size 1000"},
		{"zero buffered records", []string{"produce", "--max-buffered-records", "0"}, "--max-buffered-records 0"},
		{"too many buffered records", []string{"e2e", "--max-buffered-records", "20000000"}, "--max-buffered-records 20000000"},
		{"duration and records", []string{"produce", "--duration", "1s", "--records", "10"}, "not both"},
		{"zero duration", []string{"produce", "--duration", "0s"}, "--duration 0s"},
		{"zero producers", []string{"produce", "--producers", "0"}, "--producers 0"},
		{"fewer records than producers", []string{"produce", "--records", "2", "--producers", "4"}, "fewer than --producers"},
		{"zero partitions", []string{"produce", "--partitions", "0"}, "--partitions 0"},
		{"zero replication factor", []string{"produce", "--replication-factor", "0"}, "--replication-factor 0"},
		{"bad topic", []string{"produce", "--topic", "a/b"}, `--topic "a/b"`},
		{"no brokers", []string{"produce", "--brokers", " , "}, "need at least one"},
		{"broker without port", []string{"produce", "--brokers", "localhost"}, `--brokers "localhost"`},
		{"broker bad port", []string{"produce", "--brokers", "localhost:99999"}, "not 1-65535"},
		{"negative broker pid", []string{"produce", "--broker-pid", "-3"}, "--broker-pid -3"},
		{"negative progress", []string{"consume", "--progress", "-1s"}, "--progress -1s"},
		{"zero timeout", []string{"consume", "--timeout", "0s"}, "--timeout 0s"},
		{"consume duration and records", []string{"consume", "--duration", "1s", "--records", "5"}, "not both"},
		{"zero members", []string{"consume", "--members", "0"}, "--members 0"},
		{"tls cert without key", []string{"produce", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{"tls ca missing", []string{"produce", "--tls-ca", "/nonexistent/ca.pem"}, "--tls-ca: open /nonexistent/ca.pem"},
		{"sasl user without mechanism", []string{"produce", "--sasl-user", "alice"}, "--sasl-user needs --sasl-mechanism"},
		{"sasl mechanism without user", []string{"consume", "--sasl-mechanism", "PLAIN"}, "needs --sasl-user"},
		{"bad sasl mechanism", []string{"e2e", "--sasl-mechanism", "GSSAPI", "--sasl-user", "a"}, `--sasl-mechanism "GSSAPI"`},
		{"acls with nothing to do", []string{"acls"}, "nothing to do"},
		{"acls negative count", []string{"acls", "--count", "-1"}, "--count -1"},
		{"acls zero batch", []string{"acls", "--count", "5", "--batch", "0"}, "--batch 0"},
		{"e2e rate zero", []string{"e2e", "--rate", "0"}, "--rate 0"},
		{"e2e rate negative", []string{"e2e", "--rate", "-10"}, "--rate -10"},
		{"e2e rate NaN", []string{"e2e", "--rate", "NaN"}, "--rate NaN"},
		{"e2e records", []string{"e2e", "--records", "100"}, "takes no --records"},
		{"e2e record too small", []string{"e2e", "--record-size", "8"}, "--record-size 8"},
		{"e2e warmup too long", []string{"e2e", "--duration", "2s", "--warmup", "3s"}, "--warmup 3s"},
		{"e2e acks 0", []string{"e2e", "--acks", "0"}, "--acks 1 or all"},
		{"zero keys", []string{"produce", "--keyed", "--keys", "0"}, "--keys 0"},
		{"too many keys", []string{"e2e", "--keys", "20000000"}, "--keys 20000000"},
		{"produce rate negative", []string{"produce", "--rate", "-1"}, "--rate -1"},
		{"produce rate NaN", []string{"produce", "--rate", "NaN"}, "--rate NaN"},
		{"topic config without value", []string{"produce", "--topic-config", "cleanup.policy"}, "want KEY=VALUE"},
		{"produce warmup without duration", []string{"produce", "--warmup", "1s"}, "--warmup 1s"},
		{"produce warmup as long as duration", []string{"produce", "--duration", "2s", "--warmup", "2s"}, "--warmup 2s"},
		{"produce negative warmup", []string{"produce", "--duration", "2s", "--warmup", "-1s"}, "--warmup -1s"},
		{"quota with nothing to set", []string{"quota", "--entity", "client-id=a"}, "nothing to set"},
		{"quota without an entity", []string{"quota", "--set", "producer_byte_rate=1"}, "no entity"},
		{"quota bad entity type", []string{"quota", "--entity", "host=a", "--set", "producer_byte_rate=1"}, `entity "host=a"`},
		{"quota entity without name", []string{"quota", "--entity", "user=", "--set", "producer_byte_rate=1"}, `entity "user="`},
		{"quota entity type twice", []string{"quota", "--entity", "user=a,user=b", "--set", "producer_byte_rate=1"}, "each type once"},
		{"quota set without number", []string{"quota", "--count", "1", "--set", "producer_byte_rate=fast"}, "with a number VALUE"},
		{"quota negative count", []string{"quota", "--count", "-1", "--set", "producer_byte_rate=1"}, "--count -1"},
		{"quota zero batch", []string{"quota", "--count", "5", "--batch", "0", "--set", "producer_byte_rate=1"}, "--batch 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if len(args) > 0 && !hasFlag(args, "--brokers") {
				args = append(args, "--brokers", "127.0.0.1:1")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var out, errb bytes.Buffer
			code := run(ctx, args, &out, &errb)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("stderr %q does not mention %q", errb.String(), tc.want)
			}
			if strings.Contains(out.String(), "{") {
				t.Fatalf("a refused run printed a result: %s", out.String())
			}
		})
	}
}

func hasFlag(args []string, f string) bool {
	for _, a := range args {
		if a == f {
			return true
		}
	}
	return false
}

func TestDefaults(t *testing.T) {
	var errb bytes.Buffer
	p, err := parseProduce(nil, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if p.records != 1_000_000 || p.recordSize != 100 || p.acks != kgo.LeaderAck() || p.idempotent ||
		p.linger != 10*time.Millisecond || p.codec != kgo.NoCompression() || p.producers != 1 || p.brokers[0] != "127.0.0.1:9092" {
		t.Fatalf("produce defaults: %+v", p)
	}
	p, err = parseProduce([]string{"--acks", "-1", "--compression", "LZ4", "--duration", "3s", "--brokers", "a:1, b:2"}, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if p.acks != kgo.AllISRAcks() || !p.idempotent || p.codec != kgo.Lz4Compression() || p.compression != "lz4" ||
		p.records != 0 || p.duration != 3*time.Second || len(p.brokers) != 2 || p.brokers[1] != "b:2" {
		t.Fatalf("acks -1 / lz4 / duration: %+v", p)
	}
	c, err := parseConsume([]string{"--members", "3"}, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.group, "sluice-bench-") || c.recordsSet || c.durationSet {
		t.Fatalf("consume --members 3: %+v", c)
	}
	e, err := parseE2E([]string{"--rate", "20000", "--acks", "all", "--idempotence", "off"}, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if e.duration != 20*time.Second || e.linger != 0 || e.idempotent || e.rate != 20000 {
		t.Fatalf("e2e defaults: %+v", e)
	}
	if errb.Len() != 0 {
		t.Fatalf("valid flags printed: %s", errb.String())
	}
}

func TestHelpExitsZero(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"produce", "-h"}, &out, &errb); code != 0 {
		t.Fatalf("produce -h: exit %d", code)
	}
	if !strings.Contains(errb.String(), "-record-size") {
		t.Fatalf("produce -h does not list --record-size: %s", errb.String())
	}
}

func TestParseQuotaEntity(t *testing.T) {
	e, err := parseQuotaEntity("user=alice,client-id=<default>")
	if err != nil {
		t.Fatal(err)
	}
	if len(e) != 2 || e[0].Type != "user" || e[0].Name == nil || *e[0].Name != "alice" || e[1].Type != "client-id" || e[1].Name != nil {
		t.Fatalf("user=alice,client-id=<default>: %v", e)
	}
	if got := entityKey(e); got != "client-id=<default>,user=alice" {
		t.Fatalf("entityKey = %q", got)
	}
	for _, bad := range []string{"", "client-id", "ip=", "group=g", "user=a,user=b", "user=a,,client-id=b"} {
		if e, err := parseQuotaEntity(bad); err == nil {
			t.Errorf("%q parsed as %v", bad, e)
		}
	}
}
