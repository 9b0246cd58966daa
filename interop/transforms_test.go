package interop

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The WASM transform tests deploy the example modules (examples/transforms/) with the
// `sluice transform` CLI of the broker binary TestMain built, against a real broker's
// admin listener, and produce and consume through them with kafkajs and kcat.

// exampleModules are the examples built for the tests (all four, once per test binary).
var exampleModules = []string{"redact-json", "filter-by-header", "route-by-key", "redpanda-uppercase"}

var (
	wasmOnce sync.Once
	wasmDir  string // holds NAME.wasm for each of exampleModules
	wasmErr  error
)

// exampleWasm returns the path of the example transform name built with GOOS=wasip1
// GOARCH=wasm. The modules are built once, in parallel, next to the broker binary (so
// TestMain's cleanup removes them).
func exampleWasm(t *testing.T, name string) string {
	t.Helper()
	needBroker(t)
	wasmOnce.Do(func() {
		wasmDir = filepath.Join(filepath.Dir(brokerBin), "wasm")
		if wasmErr = os.MkdirAll(wasmDir, 0o755); wasmErr != nil {
			return
		}
		start := time.Now()
		errs := make([]error, len(exampleModules))
		var wg sync.WaitGroup
		for i, m := range exampleModules {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command("go", "build", "-o", filepath.Join(wasmDir, m+".wasm"), "./examples/transforms/"+m)
				cmd.Dir = repoRoot
				cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
				if out, err := cmd.CombinedOutput(); err != nil {
					errs[i] = fmt.Errorf("GOOS=wasip1 GOARCH=wasm go build ./examples/transforms/%s: %w\n%s", m, err, out)
				}
			}()
		}
		wg.Wait()
		wasmErr = errors.Join(errs...)
		fmt.Printf("interop: built %d example transforms in %s\n", len(exampleModules), time.Since(start).Round(time.Millisecond))
	})
	if wasmErr != nil {
		t.Fatalf("building the example transforms: %v", wasmErr)
	}
	p := filepath.Join(wasmDir, name+".wasm")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("example transform %s: %v", name, err)
	}
	return p
}

// cliResult is one run of the sluice CLI.
type cliResult struct {
	stdout, stderr string
	code           int
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit code %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// sluiceCLI runs `sluice transform ARGS... --admin ADMIN` (the flag goes right after the
// subcommand) with the binary TestMain built and returns its output and exit code; it
// fails the test only when the command cannot run or times out.
func sluiceCLI(t *testing.T, admin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	full := append([]string{"transform", args[0], "--admin", admin}, args[1:]...)
	cmd := exec.CommandContext(ctx, brokerBin, full...)
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error { killGroup(cmd.Process.Pid); return cmd.Process.Kill() }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	line := "sluice " + strings.Join(full, " ")
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s: timed out\n%s", line, res)
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", line, err)
	}
	return res
}

// mustCLI is sluiceCLI expecting exit code 0; it returns stdout.
func mustCLI(t *testing.T, admin string, args ...string) string {
	t.Helper()
	res := sluiceCLI(t, admin, args...)
	if res.code != 0 {
		t.Fatalf("sluice transform %s: %s", strings.Join(args, " "), res)
	}
	return res.stdout
}

// cliTransform is the part of `sluice transform list --json` the tests check.
type cliTransform struct {
	Name       string            `json:"name"`
	Input      string            `json:"input"`
	Outputs    []string          `json:"outputs"`
	Mode       string            `json:"mode"`
	Policy     string            `json:"policy"`
	Env        map[string]string `json:"env"`
	State      string            `json:"state"`
	LastError  string            `json:"last_error"`
	ABI        string            `json:"abi"`
	RecordsIn  int64             `json:"records_in"`
	RecordsOut int64             `json:"records_out"`
	Failures   int64             `json:"failures"`
}

// listTransforms runs `sluice transform list --json` and returns the transforms by name.
func listTransforms(t *testing.T, admin string) map[string]cliTransform {
	t.Helper()
	out := mustCLI(t, admin, "list", "--json")
	var ts []cliTransform
	if err := json.Unmarshal([]byte(out), &ts); err != nil {
		t.Fatalf("sluice transform list --json: bad JSON: %v\n%s", err, out)
	}
	m := map[string]cliTransform{}
	for _, x := range ts {
		m[x.Name] = x
	}
	return m
}

// waitTransform polls `sluice transform list --json` until cond holds for the transform
// name (present) and returns what the list said last; it fails after 20s.
func waitTransform(t *testing.T, admin, name, what string, cond func(cliTransform) bool) cliTransform {
	t.Helper()
	var last cliTransform
	var present bool
	if !pollUntil(20*time.Second, func() bool {
		last, present = listTransforms(t, admin)[name]
		return present && cond(last)
	}) {
		t.Fatalf("transform %s: not %s after 20s; list shows %+v (present: %v)", name, what, last, present)
	}
	return last
}

func needKafkajs(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		need(t, "node is not installed")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "kafkajs", "package.json")); err != nil {
		need(t, "interop/node_modules/kafkajs is missing (run `npm ci` in interop/)")
	}
	return node
}

// kv is one record's key (nil: null) and value.
type kv struct {
	Key   *string `json:"key"`
	Value string  `json:"value"`
}

func strp(s string) *string { return &s }

// kafkajsProduce sends msgs to topic in one kafkajs producer.send (transforms_test.js).
func kafkajsProduce(t *testing.T, node, addr, topic string, msgs []kv) {
	t.Helper()
	js, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	out := runCmd(t, runOpts{timeout: 60 * time.Second, env: nodeEnv()},
		node, "transforms_test.js", addr, topic, string(js))
	if !strings.Contains(out, fmt.Sprintf("OK %d messages", len(msgs))) {
		t.Fatalf("transforms_test.js exited 0 without its OK line:\n%s", out)
	}
}

// kcatProduce produces "KEY:VALUE" lines to topic with kcat -P (acks=all).
func kcatProduce(t *testing.T, kcat, addr, topic string, lines []string) {
	t.Helper()
	run(t, 30*time.Second, strings.Join(lines, "\n")+"\n", kcat, "-b", addr, "-P", "-t", topic, "-K:", "-X", "acks=all")
}

// kcatRecord is one line of `kcat -C -J`.
type kcatRecord struct {
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Payload   *string `json:"payload"`
}

func (r kcatRecord) key() string {
	if r.Key == nil {
		return "<null>"
	}
	return *r.Key
}

func (r kcatRecord) value() string {
	if r.Payload == nil {
		return "<null>"
	}
	return *r.Payload
}

// kcatConsume reads topic from the beginning with kcat -C -J; with count 0 it stops at
// the end of every partition (-e), otherwise after count records (-c, waiting for them).
func kcatConsume(t *testing.T, kcat, addr, topic string, count int) []kcatRecord {
	t.Helper()
	args := []string{"-b", addr, "-C", "-t", topic, "-o", "beginning", "-J", "-q"}
	if count == 0 {
		args = append(args, "-e")
	} else {
		args = append(args, "-c", fmt.Sprint(count))
	}
	out := run(t, 30*time.Second, "", kcat, args...)
	var recs []kcatRecord
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r kcatRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("kcat -C -J %s: bad line %q: %v", topic, line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// order is a JSON record value for redact-json: "ssn" at the top and nested.
func order(id string) string {
	return fmt.Sprintf(`{"id":%q,"ssn":"123-45-6789","customer":{"name":"Ada","ssn":"987-65-4321"},"items":[{"sku":"x1","ssn":"1"}]}`, id)
}

// checkRedacted checks that v is an order with every "ssn" masked and returns its id.
func checkRedacted(t *testing.T, where, v string) string {
	t.Helper()
	var o struct {
		ID       string `json:"id"`
		SSN      string `json:"ssn"`
		Customer struct {
			Name string `json:"name"`
			SSN  string `json:"ssn"`
		} `json:"customer"`
		Items []struct {
			SKU string `json:"sku"`
			SSN string `json:"ssn"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(v), &o); err != nil {
		t.Errorf("%s: value %q is not JSON: %v", where, v, err)
		return ""
	}
	if o.SSN != "***" || o.Customer.SSN != "***" || o.Customer.Name != "Ada" || len(o.Items) != 1 ||
		o.Items[0].SSN != "***" || o.Items[0].SKU != "x1" || strings.Contains(v, "6789") || strings.Contains(v, "4321") {
		t.Errorf("%s: value not redacted as expected: %s", where, v)
	}
	return o.ID
}

// TestTransformCLI deploys redact-json inline on a topic with `sluice transform deploy`,
// produces JSON with kafkajs and kcat, checks with kcat that every stored value is
// masked and with `sluice transform list` (JSON and table) that it runs and counted the
// records; then SIGKILLs and restarts the broker (the transform is still deployed and
// still applies), deletes it (gone from the list; later records are stored as is).
func TestTransformCLI(t *testing.T) {
	kcat := needKcat(t)
	node := needKafkajs(t)
	wasm := exampleWasm(t, "redact-json")
	b := startBroker(t)
	const topic = "orders"
	createTopic(t, b.addr, topic, 2)

	out := mustCLI(t, b.adminAddr, "deploy", "--name", "redact", "--input", topic, "--env", "REDACT_FIELD=ssn", wasm)
	if want := "deployed redact (inline, input orders,"; !strings.Contains(out, want) {
		t.Errorf("deploy output %q lacks %q", out, want)
	}

	var msgs []kv
	for i := 0; i < 5; i++ {
		msgs = append(msgs, kv{Key: strp(fmt.Sprintf("kjs-%d", i)), Value: order(fmt.Sprintf("kafkajs-%d", i))})
	}
	kafkajsProduce(t, node, b.addr, topic, msgs)
	var lines []string
	for i := 0; i < 4; i++ {
		lines = append(lines, fmt.Sprintf("kcat-%d:%s", i, order(fmt.Sprintf("kcat-%d", i))))
	}
	kcatProduce(t, kcat, b.addr, topic, lines)
	const produced = 9

	checkAll := func(want []string) {
		t.Helper()
		recs := kcatConsume(t, kcat, b.addr, topic, 0)
		var ids []string
		for _, r := range recs {
			ids = append(ids, checkRedacted(t, fmt.Sprintf("%s/%d@%d", topic, r.Partition, r.Offset), r.value()))
		}
		slices.Sort(ids)
		slices.Sort(want)
		if !slices.Equal(ids, want) {
			t.Errorf("records in %s: ids %q, want %q", topic, ids, want)
		}
	}
	want := []string{"kafkajs-0", "kafkajs-1", "kafkajs-2", "kafkajs-3", "kafkajs-4", "kcat-0", "kcat-1", "kcat-2", "kcat-3"}
	checkAll(want)

	st := waitTransform(t, b.adminAddr, "redact", fmt.Sprintf("running with records_in %d", produced), func(s cliTransform) bool {
		return s.State == "running" && s.RecordsIn >= produced
	})
	if st.RecordsIn != produced || st.Mode != "inline" || st.Input != topic || st.Policy != "reject" ||
		st.Failures != 0 || st.Env["REDACT_FIELD"] != "ssn" {
		t.Errorf("list --json: %+v; want inline on %s, policy reject, records_in %d, no failures, env REDACT_FIELD=ssn",
			st, topic, produced)
	}

	table := mustCLI(t, b.adminAddr, "list")
	tlines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	if len(tlines) != 2 || !strings.HasPrefix(tlines[0], "NAME ") || !strings.Contains(tlines[0], "STATE") {
		t.Errorf("list: want a header line starting with NAME and one transform line:\n%s", table)
	} else if f := strings.Fields(tlines[1]); len(f) < 7 || f[0] != "redact" || f[1] != "inline" || f[2] != topic || f[5] != "running" || f[6] != fmt.Sprint(produced) {
		t.Errorf("list: transform line %q: want redact inline %s - reject running %d ...", tlines[1], topic, produced)
	}

	// A SIGKILL and restart: the deployment is in the metadata log, so the transform is
	// back before the broker serves (the produce right after /readyz is masked too) and
	// the list shows it running.
	b.kill()
	b.start()
	kafkajsProduce(t, node, b.addr, topic, []kv{{Key: strp("kjs-restart"), Value: order("after-restart")}})
	waitTransform(t, b.adminAddr, "redact", "running after the restart", func(s cliTransform) bool { return s.State == "running" })
	want = append(want, "after-restart")
	checkAll(want)

	out = mustCLI(t, b.adminAddr, "delete", "redact")
	if strings.TrimSpace(out) != "deleted redact" {
		t.Errorf("delete output %q, want \"deleted redact\"", out)
	}
	if ts := listTransforms(t, b.adminAddr); len(ts) != 0 {
		t.Errorf("list after delete: %+v, want none", ts)
	}
	if res := sluiceCLI(t, b.adminAddr, "delete", "redact"); res.code == 0 || !strings.Contains(res.stderr, "no transform named redact") {
		t.Errorf("second delete: want a non-zero exit and \"no transform named redact\" on stderr; %s", res)
	}

	raw := order("after-delete")
	kcatProduce(t, kcat, b.addr, topic, []string{"kcat-raw:" + raw})
	recs := kcatConsume(t, kcat, b.addr, topic, 0)
	if len(recs) != len(want)+1 {
		t.Errorf("%s holds %d records, want %d", topic, len(recs), len(want)+1)
	}
	found := 0
	for _, r := range recs {
		if r.key() == "kcat-raw" {
			found++
			if r.value() != raw {
				t.Errorf("record produced after the delete: value %q, want it stored as is: %q", r.value(), raw)
			}
		} else {
			checkRedacted(t, fmt.Sprintf("%s/%d@%d", topic, r.Partition, r.Offset), r.value())
		}
	}
	if found != 1 {
		t.Errorf("the record produced after the delete appears %d times, want once", found)
	}
}

// TestTransformCLIDerived deploys route-by-key as a derived transform with two outputs
// through the CLI, produces keyed records with kcat and checks with kcat that each
// output holds exactly the records routed to it (and the input all of them). Deploys of
// a file that is not WASM and on a missing input topic fail with a non-zero exit and a
// clear message on stderr.
func TestTransformCLIDerived(t *testing.T) {
	kcat := needKcat(t)
	wasm := exampleWasm(t, "route-by-key")
	b := startBroker(t)
	createTopic(t, b.addr, "events", 2)
	createTopic(t, b.addr, "a-m", 1)
	createTopic(t, b.addr, "n-z", 1)

	out := mustCLI(t, b.adminAddr, "deploy", "--name", "router", "--input", "events", "--output", "a-m", "--output", "n-z",
		"--mode", "derived", wasm)
	if want := "deployed router (derived, input events,"; !strings.Contains(out, want) {
		t.Errorf("deploy output %q lacks %q", out, want)
	}

	low := []string{"apple", "Mango", "banana", "kiwi", "m"}
	high := []string{"zebra", "nut", "Yak", "1abc", "n"}
	var lines []string
	for i := range low {
		lines = append(lines, low[i]+":v-"+low[i], high[i]+":v-"+high[i])
	}
	kcatProduce(t, kcat, b.addr, "events", lines)

	check := func(topic string, want []string) {
		t.Helper()
		kcatConsume(t, kcat, b.addr, topic, len(want)) // waits for the derived records
		recs := kcatConsume(t, kcat, b.addr, topic, 0)
		var keys []string
		for _, r := range recs {
			keys = append(keys, r.key())
			if r.value() != "v-"+r.key() {
				t.Errorf("%s/%d@%d: key %q value %q, want value %q", topic, r.Partition, r.Offset, r.key(), r.value(), "v-"+r.key())
			}
		}
		want = slices.Clone(want)
		slices.Sort(keys)
		slices.Sort(want)
		if !slices.Equal(keys, want) {
			t.Errorf("%s: keys %q, want %q", topic, keys, want)
		}
	}
	check("a-m", low)
	check("n-z", high)
	check("events", append(slices.Clone(low), high...)) // derived mode leaves the input alone

	st := waitTransform(t, b.adminAddr, "router", "running with every record in and out", func(s cliTransform) bool {
		return s.State == "running" && s.RecordsIn >= 10 && s.RecordsOut >= 10
	})
	if st.Mode != "derived" || !slices.Equal(st.Outputs, []string{"a-m", "n-z"}) || st.RecordsIn != 10 || st.RecordsOut != 10 {
		t.Errorf("list --json: %+v; want derived, outputs [a-m n-z], 10 records in and out", st)
	}

	// Not a WASM module.
	junk := make([]byte, 4096)
	if _, err := rand.Read(junk); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "junk.wasm")
	if err := os.WriteFile(bad, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	res := sluiceCLI(t, b.adminAddr, "deploy", "--name", "junk", "--input", "events", bad)
	if res.code == 0 || !strings.HasPrefix(res.stderr, "sluice transform deploy: ") || !strings.Contains(res.stderr, "HTTP 400") ||
		!strings.Contains(strings.ToLower(res.stderr), "webassembly") || strings.Contains(res.stdout, "deployed") {
		t.Errorf("deploy of random bytes: want a non-zero exit and a 400 error about the module on stderr; %s", res)
	}
	t.Logf("deploy of random bytes: exit code %d, stderr: %s", res.code, strings.TrimSpace(res.stderr))

	// A missing input topic.
	res = sluiceCLI(t, b.adminAddr, "deploy", "--name", "orphan", "--input", "no-such-topic", wasm)
	if res.code == 0 || !strings.Contains(res.stderr, `input topic "no-such-topic" does not exist`) {
		t.Errorf("deploy on a missing input topic: want a non-zero exit and an error naming the topic; %s", res)
	}

	ts := listTransforms(t, b.adminAddr)
	if _, ok := ts["junk"]; ok || len(ts) != 1 {
		t.Errorf("list after the failed deploys: %+v, want only router", ts)
	}
	if _, ok := ts["orphan"]; ok {
		t.Errorf("list shows the failed deploy orphan: %+v", ts)
	}
}

// TestTransformRedpandaSDK deploys redpanda-uppercase (built with Redpanda's Go
// transform SDK) inline through the CLI, produces with kafkajs and checks with kcat
// (librdkafka) that the values are stored upper-cased and keys kept.
func TestTransformRedpandaSDK(t *testing.T) {
	kcat := needKcat(t)
	node := needKafkajs(t)
	wasm := exampleWasm(t, "redpanda-uppercase")
	b := startBroker(t)
	const topic = "shout"
	createTopic(t, b.addr, topic, 1)

	mustCLI(t, b.adminAddr, "deploy", "--name", "upper", "--input", topic, wasm)
	msgs := []kv{
		{Key: strp("k0"), Value: "hello world"},
		{Key: strp("k1"), Value: "Mixed Case wörld 123"},
		{Key: nil, Value: "null key, still upper"},
		{Key: strp("k3"), Value: "ALREADY UPPER"},
	}
	kafkajsProduce(t, node, b.addr, topic, msgs)

	recs := kcatConsume(t, kcat, b.addr, topic, 0)
	if len(recs) != len(msgs) {
		t.Fatalf("%s holds %d records, want %d: %+v", topic, len(recs), len(msgs), recs)
	}
	for i, r := range recs {
		wantKey := "<null>"
		if msgs[i].Key != nil {
			wantKey = *msgs[i].Key
		}
		if want := strings.ToUpper(msgs[i].Value); r.value() != want || r.key() != wantKey || r.Offset != int64(i) {
			t.Errorf("record %d: offset %d key %q value %q, want offset %d key %q value %q",
				i, r.Offset, r.key(), r.value(), i, wantKey, want)
		}
	}
	st := waitTransform(t, b.adminAddr, "upper", "running with every record in", func(s cliTransform) bool {
		return s.State == "running" && s.RecordsIn >= int64(len(msgs))
	})
	if st.ABI != "redpanda_transform" || st.RecordsIn != int64(len(msgs)) || st.Failures != 0 {
		t.Errorf("list --json: %+v; want abi redpanda_transform, records_in %d, no failures", st, len(msgs))
	}
}
