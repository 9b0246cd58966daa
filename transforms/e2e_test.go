package transforms_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/transforms"
)

// modules are the WASM programs the tests deploy, built once by TestMain: the
// examples, and failing guests from the runtime's test data.
var modules = map[string]string{
	"redact-json":        "../examples/transforms/redact-json",
	"filter-by-header":   "../examples/transforms/filter-by-header",
	"route-by-key":       "../examples/transforms/route-by-key",
	"stamp-producer":     "../examples/transforms/stamp-producer",
	"redpanda-uppercase": "../examples/transforms/redpanda-uppercase",
	"identity":           "./wasm/testdata/guests/identity",
	"sdk-identity":       "../examples/transforms/identity",
	"trap":               "./wasm/testdata/guests/trap",
	"loop":               "./wasm/testdata/guests/loop",
	"memhog":             "./wasm/testdata/guests/memhog",
}

var (
	wasmDir  string
	buildErr error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-transforms-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wasmDir = dir
	buildErr = buildModules(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildModules(dir string) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	sem := make(chan struct{}, 2)
	for name, src := range modules {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name+".wasm"), src)
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%s: %v\n%s", name, err, out))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("building test modules: %s", strings.Join(errs, "\n"))
	}
	return nil
}

// startBroker starts an in-process broker with configYAML and the transforms module
// options given (a YAML flow-mapping body, "" for none). Every broker of this package
// shares one compilation cache under wasmDir: compiling a Go-built module in a -race
// binary takes seconds, and the tests deploy the same few modules again and again.
// Tests that check a broker's own cache (restarts) still see it: the cache is as
// persistent as a data dir's.
func startBroker(t *testing.T, configYAML, transformsOpts string) *testbroker.Broker {
	t.Helper()
	opts := "cache_dir: " + strconv.Quote(filepath.Join(wasmDir, "cache"))
	if transformsOpts != "" {
		opts += ", " + transformsOpts
	}
	return testbroker.Start(t, testbroker.WithConfig(configYAML+"modules:\n  transforms: {"+opts+"}\n"))
}

func module(t *testing.T, name string) []byte {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	b, err := os.ReadFile(filepath.Join(wasmDir, name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deploy PUTs a module through the admin API and returns the HTTP status and body.
func deploy(t *testing.T, b *testbroker.Broker, name, wasm string, q url.Values) (int, string) {
	t.Helper()
	var body []byte
	if wasm != "" {
		body = module(t, wasm)
	}
	return deployBytes(t, b, name, body, q)
}

func deployBytes(t *testing.T, b *testbroker.Broker, name string, body []byte, q url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, "http://"+b.AdminAddr+"/v1/transforms/"+name+"?"+q.Encode(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// startHeaderFilter starts a broker with a one-partition topic and the filter-by-header
// example deployed inline on it as name, and returns the broker and a client of it.
func startHeaderFilter(t *testing.T, name, topic string) (*testbroker.Broker, *kgo.Client) {
	t.Helper()
	b := startBroker(t, "", "")
	createTopic(t, b, topic, 1)
	mustDeploy(t, b, name, "filter-by-header", url.Values{"input": {topic}})
	return b, b.Client(t)
}

func mustDeploy(t *testing.T, b *testbroker.Broker, name, wasm string, q url.Values) {
	t.Helper()
	if code, body := deploy(t, b, name, wasm, q); code != http.StatusCreated {
		t.Fatalf("deploy %s: HTTP %d: %s", name, code, body)
	}
}

func list(t *testing.T, b *testbroker.Broker) map[string]transforms.Status {
	t.Helper()
	out := map[string]transforms.Status{}
	for _, s := range statuses(t, b) {
		out[s.Name] = s
	}
	return out
}

// statuses returns the admin API's list of the transforms deployed on b.
func statuses(t testing.TB, b *testbroker.Broker) []transforms.Status {
	t.Helper()
	resp, err := http.Get("http://" + b.AdminAddr + "/v1/transforms")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ss []transforms.Status
	if err := json.NewDecoder(resp.Body).Decode(&ss); err != nil {
		t.Fatal(err)
	}
	return ss
}

func createTopic(t *testing.T, b *testbroker.Broker, name string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.Admin(t).CreateTopic(ctx, partitions, 1, nil, name); err != nil {
		t.Fatal(err)
	}
}

func produce(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// consume reads topic from the start until n records arrived (or 15 s passed).
func consume(t *testing.T, b *testbroker.Broker, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func TestInlineRedactJSON(t *testing.T) {
	b := startBroker(t, "", "")
	createTopic(t, b, "orders", 1)
	mustDeploy(t, b, "redact", "redact-json", url.Values{"input": {"orders"}})
	cl := b.Client(t, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	var recs []*kgo.Record
	for i := range 50 {
		recs = append(recs, &kgo.Record{Topic: "orders", Key: []byte(fmt.Sprint(i)),
			Value: []byte(fmt.Sprintf(`{"id":%d,"ssn":"123-45-%04d","note":"x"}`, i, i))})
	}
	if err := produce(t, cl, recs...); err != nil {
		t.Fatal(err)
	}
	got := consume(t, b, "orders", 50)
	if len(got) != 50 {
		t.Fatalf("consumed %d records, want 50", len(got))
	}
	for i, r := range got {
		if strings.Contains(string(r.Value), "123-45") || !strings.Contains(string(r.Value), fmt.Sprintf(`"id":%d`, i)) {
			t.Fatalf("record %d = %s: want the ssn masked and the rest kept", i, r.Value)
		}
	}
	s := list(t, b)["redact"]
	if s.State != "running" || s.RecordsIn != 50 || s.RecordsOut != 50 || s.Mode != "inline" {
		t.Fatalf("list = %+v", s)
	}

	// The fetch path is unmodified: the bytes a Fetch returns are the segment's bytes.
	md, err := b.Admin(t).ListTopics(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes = 100, 10<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "orders", md["orders"].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 10 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	fetched := resp.Topics[0].Partitions[0].RecordBatches
	seg, err := os.ReadFile(filepath.Join(b.DataDir, "orders-0", "00000000000000000000.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fetched) == 0 || !bytes.Equal(fetched, seg) {
		t.Fatalf("fetched %d bytes, segment has %d: want identical bytes", len(fetched), len(seg))
	}
}

func TestInlineFilterByHeader(t *testing.T) {
	b, cl := startHeaderFilter(t, "filter", "events")
	var recs []*kgo.Record
	for i := range 20 {
		r := &kgo.Record{Topic: "events", Value: []byte(fmt.Sprint(i))}
		if i%2 == 1 {
			r.Headers = []kgo.RecordHeader{{Key: "drop", Value: []byte("true")}}
		}
		recs = append(recs, r)
	}
	// One batch of only dropped records too: nothing is appended, the produce succeeds.
	if err := produce(t, cl, recs...); err != nil {
		t.Fatal(err)
	}
	if err := produce(t, cl, &kgo.Record{Topic: "events", Value: []byte("gone"), Headers: []kgo.RecordHeader{{Key: "drop"}}}); err != nil {
		t.Fatal(err)
	}
	if err := produce(t, cl, &kgo.Record{Topic: "events", Value: []byte("last")}); err != nil {
		t.Fatal(err)
	}
	got := consume(t, b, "events", 11)
	var vals []string
	for _, r := range got {
		vals = append(vals, string(r.Value))
	}
	if want := "0 2 4 6 8 10 12 14 16 18 last"; strings.Join(vals, " ") != want {
		t.Fatalf("consumed %q, want %q", strings.Join(vals, " "), want)
	}
}

func TestDerivedRouteByKey(t *testing.T) {
	b := startBroker(t, "", "")
	createTopic(t, b, "in", 2)
	createTopic(t, b, "a-to-m", 1)
	createTopic(t, b, "n-to-z", 1)
	mustDeploy(t, b, "router", "route-by-key", url.Values{"input": {"in"}, "mode": {"derived"}, "output": {"a-to-m", "n-to-z"}})
	cl := b.Client(t)
	keys := []string{"apple", "zebra", "mango", "nut", "banana", "yak"}
	for _, k := range keys {
		if err := produce(t, cl, &kgo.Record{Topic: "in", Key: []byte(k), Value: []byte(k)}); err != nil {
			t.Fatal(err)
		}
	}
	first := consume(t, b, "a-to-m", 3)
	second := consume(t, b, "n-to-z", 3)
	if len(first) != 3 || len(second) != 3 {
		t.Fatalf("outputs got %d and %d records, want 3 and 3", len(first), len(second))
	}
	for _, r := range first {
		if k := string(r.Key); k[0] > 'm' {
			t.Fatalf("%s routed to a-to-m", k)
		}
	}
	// The input is untouched in derived mode.
	if in := consume(t, b, "in", 6); len(in) != 6 {
		t.Fatalf("input has %d records, want 6", len(in))
	}
	// After a restart the worker resumes from its stored position: new records are
	// routed, old ones are not written again.
	b.Restart(t)
	if err := produce(t, b.Client(t), &kgo.Record{Topic: "in", Key: []byte("kiwi"), Value: []byte("kiwi")}); err != nil {
		t.Fatal(err)
	}
	again := consume(t, b, "a-to-m", 4)
	if len(again) != 4 || string(again[3].Key) != "kiwi" {
		t.Fatalf("after restart a-to-m has %d records (last %q), want 4 ending with kiwi", len(again), string(again[len(again)-1].Key))
	}
}

func TestRedpandaSDKModule(t *testing.T) {
	b := startBroker(t, "", "")
	createTopic(t, b, "rp-in", 1)
	createTopic(t, b, "rp-out", 1)
	mustDeploy(t, b, "rp-inline", "redpanda-uppercase", url.Values{"input": {"rp-in"}})
	mustDeploy(t, b, "rp-derived", "redpanda-uppercase", url.Values{"input": {"rp-in"}, "mode": {"derived"}, "output": {"rp-out"}})
	if err := produce(t, b.Client(t), &kgo.Record{Topic: "rp-in", Value: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	if got := consume(t, b, "rp-in", 1); len(got) != 1 || string(got[0].Value) != "HELLO" {
		t.Fatalf("inline: got %v", got)
	}
	// Derived reads the stored (already upper-cased) record and upper-cases it again.
	if got := consume(t, b, "rp-out", 1); len(got) != 1 || string(got[0].Value) != "HELLO" {
		t.Fatalf("derived: got %v", got)
	}
	if s := list(t, b)["rp-inline"]; s.ABI != "redpanda_transform" {
		t.Fatalf("abi = %q", s.ABI)
	}
}

func TestFailurePolicies(t *testing.T) {
	b := startBroker(t, "", "timeout_ms: 500, breaker_failures: 3, breaker_pause_ms: 60000")
	for _, topic := range []string{"rej", "drp", "dlq", "loop", "mem"} {
		createTopic(t, b, topic, 1)
	}
	mustDeploy(t, b, "t-rej", "trap", url.Values{"input": {"rej"}})
	mustDeploy(t, b, "t-drp", "trap", url.Values{"input": {"drp"}, "policy": {"drop"}})
	mustDeploy(t, b, "t-dlq", "trap", url.Values{"input": {"dlq"}, "policy": {"dlq"}, "dlq_topic": {"dead"}})
	mustDeploy(t, b, "t-loop", "loop", url.Values{"input": {"loop"}})
	mustDeploy(t, b, "t-mem", "memhog", url.Values{"input": {"mem"}, "memory_limit_pages": {"512"}})
	cl := b.Client(t, kgo.RecordRetries(0), kgo.RequestRetries(0))

	// The failing guests fail on a trigger value and pass anything else.
	wantCode := func(topic, value string, want *kerr.Error) {
		t.Helper()
		err := produce(t, cl, &kgo.Record{Topic: topic, Value: []byte(value)})
		if err == nil || !strings.Contains(err.Error(), want.Message) {
			t.Fatalf("produce to %s: %v, want %s", topic, err, want.Message)
		}
	}
	wantCode("rej", "trap", kerr.InvalidRecord)
	wantCode("loop", "loop", kerr.InvalidRecord)
	wantCode("mem", "hog", kerr.InvalidRecord)
	// After a timeout and an out-of-memory death the pools serve again.
	for _, topic := range []string{"loop", "mem"} {
		if err := produce(t, cl, &kgo.Record{Topic: topic, Value: []byte("fine")}); err != nil {
			t.Fatalf("%s after a failure: %v", topic, err)
		}
	}
	if err := produce(t, cl, &kgo.Record{Topic: "drp", Value: []byte("trap")}); err != nil {
		t.Fatalf("drop policy: %v", err)
	}
	if err := produce(t, cl, &kgo.Record{Topic: "dlq", Key: []byte("k"), Value: []byte("trap")}); err != nil {
		t.Fatalf("dlq policy: %v", err)
	}
	dead := consume(t, b, "dead", 1)
	if len(dead) != 1 || string(dead[0].Value) != "trap" {
		t.Fatalf("dead-letter topic: %v", dead)
	}
	hdr := map[string]string{}
	for _, h := range dead[0].Headers {
		hdr[h.Key] = string(h.Value)
	}
	if hdr["sluice.transform"] != "t-dlq" || hdr["sluice.source.topic"] != "dlq" || hdr["sluice.error"] == "" {
		t.Fatalf("dead-letter headers: %v", hdr)
	}
	if got := consume(t, b, "drp", 0); len(got) != 0 {
		t.Fatalf("drop policy stored %d records", len(got))
	}
	// The breaker pauses the trapping transform after 3 failures; list says so.
	for range 3 {
		_ = produce(t, cl, &kgo.Record{Topic: "rej", Value: []byte("trap")})
	}
	s := list(t, b)
	if st := s["t-rej"].State; !strings.HasPrefix(st, "paused") {
		t.Fatalf("t-rej state %q, want paused", st)
	}
	if s["t-drp"].Dropped != 1 || s["t-dlq"].DeadLettered != 1 || s["t-loop"].Failures == 0 {
		t.Fatalf("stats: %+v", s)
	}
	// The broker is still serving after all that.
	createTopic(t, b, "fine", 1)
	if err := produce(t, cl, &kgo.Record{Topic: "fine", Value: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
}

func TestDeployValidation(t *testing.T) {
	b := startBroker(t, "", "")
	createTopic(t, b, "t1", 1)
	for _, tc := range []struct {
		name string
		body []byte
		q    url.Values
	}{
		{"notwasm", []byte("definitely not wasm"), url.Values{"input": {"t1"}}},
		{"empty", nil, url.Values{"input": {"t1"}}},
		{"noinput", module(t, "identity"), url.Values{"input": {"missing"}}},
		{"badmode", module(t, "identity"), url.Values{"input": {"t1"}, "mode": {"sideways"}}},
		{"badpolicy", module(t, "identity"), url.Values{"input": {"t1"}, "policy": {"shrug"}}},
		{"derivednoout", module(t, "identity"), url.Values{"input": {"t1"}, "mode": {"derived"}}},
		{"bad name!", module(t, "identity"), url.Values{"input": {"t1"}}},
	} {
		if code, body := deployBytes(t, b, url.PathEscape(tc.name), tc.body, tc.q); code != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d (%s), want 400", tc.name, code, body)
		}
	}
	mustDeploy(t, b, "first", "identity", url.Values{"input": {"t1"}})
	if code, body := deploy(t, b, "second", "identity", url.Values{"input": {"t1"}}); code != http.StatusBadRequest {
		t.Fatalf("a second inline transform on one topic: HTTP %d (%s), want 400", code, body)
	}
}

func TestRestartRedeployDelete(t *testing.T) {
	b := startBroker(t, "", "")
	createTopic(t, b, "docs", 1)
	mustDeploy(t, b, "up", "redpanda-uppercase", url.Values{"input": {"docs"}})
	b.Restart(t)
	if s, ok := list(t, b)["up"]; !ok || s.State != "running" {
		t.Fatalf("after restart: %+v (present %v)", s, ok)
	}
	cl := b.Client(t)
	if err := produce(t, cl, &kgo.Record{Topic: "docs", Value: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	// Redeploy under the same name with another module: it replaces the first.
	mustDeploy(t, b, "up", "identity", url.Values{"input": {"docs"}})
	if err := produce(t, cl, &kgo.Record{Topic: "docs", Value: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodDelete, "http://"+b.AdminAddr+"/v1/transforms/up", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: HTTP %d", resp.StatusCode)
	}
	if _, ok := list(t, b)["up"]; ok {
		t.Fatal("deleted transform still listed")
	}
	if err := produce(t, cl, &kgo.Record{Topic: "docs", Value: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	var vals []string
	for _, r := range consume(t, b, "docs", 3) {
		vals = append(vals, string(r.Value))
	}
	if strings.Join(vals, "") != "Abc" {
		t.Fatalf("values %q, want A (upper-cased), b (identity), c (no transform)", vals)
	}
	b.Restart(t)
	if len(list(t, b)) != 0 {
		t.Fatal("deleted transform came back after a restart")
	}
}
