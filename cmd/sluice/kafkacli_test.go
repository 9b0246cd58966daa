package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// cli runs the sluice command line against addr and returns its exit status,
// stdout and stderr.
func cli(t *testing.T, addr string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	rc := run(append(args, "--brokers", addr), &out, &errb)
	return rc, out.String(), errb.String()
}

// mustCLI is cli that fails the test unless the exit status is 0.
func mustCLI(t *testing.T, addr string, args ...string) string {
	t.Helper()
	rc, out, errs := cli(t, addr, args...)
	if rc != 0 {
		t.Fatalf("sluice %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), rc, out, errs)
	}
	return out
}

func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
}

// The topic, produce, consume, group and cluster commands against a real broker:
// tables, --json, flags after positional arguments, errors and exit codes.
func TestKafkaCommands(t *testing.T) {
	b := testbroker.Start(t)
	addr := b.Addr

	// topic create: flags after the names, one failure among successes exits 1.
	out := mustCLI(t, addr, "topic", "create", "orders", "audit", "-p", "3", "-c", "retention.ms=60000")
	wantLines(t, out, "TOPIC", "orders", "audit", "created")
	rc, out, errs := cli(t, addr, "topic", "create", "orders", "fresh")
	if rc != 1 || !strings.Contains(out, "TOPIC_ALREADY_EXISTS") || !strings.Contains(errs, "1 topic creations failed") {
		t.Fatalf("re-create: exit %d\n%s%s", rc, out, errs)
	}
	// topic list, table and JSON.
	out = mustCLI(t, addr, "topic", "list")
	wantLines(t, out, "NAME", "PARTITIONS", "REPLICAS", "orders")
	if strings.Contains(out, "__consumer_offsets") {
		t.Fatalf("internal topic listed without --internal:\n%s", out)
	}
	var listed []struct {
		Topic      string `json:"topic"`
		Partitions int    `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, addr, "topic", "list", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(listed, func(l struct {
		Topic      string `json:"topic"`
		Partitions int    `json:"partitions"`
	}) bool {
		return l.Topic == "orders"
	}); i < 0 || listed[i].Partitions != 3 {
		t.Fatalf("list --json: %+v", listed)
	}

	// alter-config and add-partitions, then describe shows both.
	mustCLI(t, addr, "topic", "alter-config", "orders", "--set", "cleanup.policy=compact", "--delete", "retention.ms")
	mustCLI(t, addr, "topic", "add-partitions", "orders", "--num", "1")
	out = mustCLI(t, addr, "topic", "describe", "orders")
	wantLines(t, out, "PARTITIONS  4", "cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG", "LOG-END-OFFSET")
	if strings.Contains(out, "retention.ms") {
		t.Fatalf("retention.ms still set after --delete:\n%s", out)
	}
	if rc, _, errs := cli(t, addr, "topic", "alter-config", "orders", "--set", "no.such.config=1"); rc != 1 || !strings.Contains(errs, "failed") {
		t.Fatalf("unknown config: exit %d %s", rc, errs)
	}
	if rc, _, _ := cli(t, addr, "topic", "describe", "missing"); rc != 1 {
		t.Fatalf("describe of a missing topic: exit %d", rc)
	}

	// produce keys, values and headers from stdin; consume them back.
	var perr bytes.Buffer
	if err := produceRun([]string{"audit", "-k", ":", "-H", "src=cli", "-p", "1", "--brokers", addr}, strings.NewReader("k1:v1\nk2:v2\nplain\n"), &bytes.Buffer{}, &perr); err != nil {
		t.Fatalf("produce: %v (%s)", err, perr.String())
	}
	wantLines(t, perr.String(), "produced 3 records to audit")
	out = mustCLI(t, addr, "consume", "audit", "-e", "-f", `%p|%o|%k|%v|%h\n`)
	if want := "1|0|k1|v1|src=cli\n1|1|k2|v2|src=cli\n1|2||plain|src=cli\n"; out != want {
		t.Fatalf("consume -e:\n%q\nwant\n%q", out, want)
	}
	out = mustCLI(t, addr, "consume", "audit", "-n", "1", "-o", "1", "--json")
	var rec struct {
		Offset  int64
		Key     *string
		Value   *string
		Headers []struct{ Key, Value string }
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.Offset != 1 || *rec.Key != "k2" || *rec.Value != "v2" || len(rec.Headers) != 1 {
		t.Fatalf("consume --json: %v %q", err, out)
	}
	if out := mustCLI(t, addr, "consume", "audit", "-e", "-o", "end"); out != "" {
		t.Fatalf("consume -e -o end printed %q", out)
	}
	// -o -N: the last N records of each partition (and no more than there are).
	if out := mustCLI(t, addr, "consume", "audit", "-e", "-o", "-2", "-f", `%o|%v\n`); out != "1|v2\n2|plain\n" {
		t.Fatalf("consume -e -o -2 printed %q", out)
	}
	if out := mustCLI(t, addr, "consume", "audit", "-e", "-o", "-10", "-p", "1", "-f", `%o\n`); out != "0\n1\n2\n" {
		t.Fatalf("consume -e -o -10 printed %q", out)
	}

	// A group: consume commits, describe shows lag, seek moves it, delete removes it.
	mustCLI(t, addr, "consume", "audit", "-g", "readers", "-n", "2")
	out = mustCLI(t, addr, "group", "list")
	wantLines(t, out, "GROUP", "readers", "Empty")
	out = mustCLI(t, addr, "group", "describe", "readers")
	wantLines(t, out, "STATE        Empty", "TOTAL-LAG    1", "CURRENT-OFFSET  LOG-END-OFFSET  LAG", "audit  1          2               3               1")
	out = mustCLI(t, addr, "group", "seek", "readers", "--to", "start")
	wantLines(t, out, "audit  1          0           ok")
	var described []struct {
		TotalLag int64 `json:"total_lag"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, addr, "group", "describe", "readers", "--json")), &described); err != nil || len(described) != 1 || described[0].TotalLag != 3 {
		t.Fatalf("describe --json after seek: %v %+v", err, described)
	}
	mustCLI(t, addr, "group", "delete", "readers")
	if out := mustCLI(t, addr, "group", "list"); strings.Contains(out, "readers") {
		t.Fatalf("deleted group still listed:\n%s", out)
	}

	// cluster info and health.
	out = mustCLI(t, addr, "cluster", "info")
	wantLines(t, out, "CLUSTER", "CONTROLLER  1", "1*")
	out = mustCLI(t, addr, "cluster", "health")
	wantLines(t, out, "HEALTHY                      true")

	// topic delete.
	wantLines(t, mustCLI(t, addr, "topic", "delete", "fresh"), "fresh", "deleted")
	if rc, out, _ := cli(t, addr, "topic", "delete", "fresh"); rc != 1 || !strings.Contains(out, "UNKNOWN_TOPIC") {
		t.Fatalf("second delete: exit %d %s", rc, out)
	}

	// What the commands sent shows in /metrics by API name.
	resp, err := http.Get("http://" + b.AdminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantLines(t, string(body), `sluice_requests_by_api_total{api="CreateTopics",api_key="19"}`, `sluice_requests_by_api_total{api="Fetch",api_key="1"}`)
}

// Usage errors exit 2, an unreachable broker exits 1 with a message that says what
// to check, and -h exits 0.
func TestKafkaCommandErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		args []string
		rc   int
		want string
	}{
		{[]string{"topic", "create"}, 2, "missing topic name"},
		{[]string{"topic", "create", "x", "-c", "novalue"}, 2, "want KEY=VALUE"},
		{[]string{"topic", "bogus"}, 2, "unknown command"},
		{[]string{"topic", "add-partitions", "x"}, 2, "--num must be"},
		{[]string{"consume", "t", "-o", "yesterday"}, 2, "want start, end"},
		{[]string{"consume", "t", "-f", "%z"}, 2, "unknown field %z"},
		{[]string{"produce", "t", "--acks", "2"}, 2, "want all, 1 or 0"},
		{[]string{"group", "seek", "g"}, 2, "--to is required"},
		{[]string{"topic", "list"}, 1, "cannot reach a broker at " + dead},
		{[]string{"cluster", "health"}, 1, "set --brokers or $SLUICE_BROKERS"},
	} {
		rc, _, errs := cli(t, dead, tc.args...)
		if rc != tc.rc || !strings.Contains(errs, tc.want) {
			t.Errorf("sluice %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), rc, errs, tc.rc, tc.want)
		}
	}
	var out, errb bytes.Buffer
	if rc := run([]string{"topic", "create", "-h"}, &out, &errb); rc != 0 || !strings.Contains(errb.String(), "-partitions") {
		t.Fatalf("-h: exit %d %q", rc, errb.String())
	}
}

// Flags may follow positional arguments; "--" ends them.
func TestParseFlagsInterspersed(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	n := fs.Int("n", 0, "")
	pos, err := parseFlags(fs, []string{"a", "-n", "3", "b", "--", "-c"})
	if err != nil || *n != 3 || !slices.Equal(pos, []string{"a", "b", "-c"}) {
		t.Fatalf("got %v %d %v", pos, *n, err)
	}
}

// serve --help describes the defaults and exits 0; version names the Go version.
func TestServeHelpAndVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"serve", "--help"}, &out, &errb); rc != 0 || !strings.Contains(errb.String(), "127.0.0.1:9092") || !strings.Contains(errb.String(), "-data-dir") {
		t.Fatalf("serve --help: rc %d %q", rc, errb.String())
	}
	if rc := run([]string{"version"}, &out, &errb); rc != 0 || !strings.HasPrefix(out.String(), "sluice ") || !strings.Contains(out.String(), " go1.") {
		t.Fatalf("version: rc %d %q", rc, out.String())
	}
}

// A config with several mistakes names them all, with hints, before anything is
// written.
func TestServeConfigErrorsAtOnce(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(cfgPath, []byte("configs: {num.partiions: \"3\", log.retention.ms: \"-5\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	var out, errb bytes.Buffer
	rc := run([]string{"serve", "--config", cfgPath, "--data-dir", data}, &out, &errb)
	wantLines(t, errb.String(), "2 problems", "did you mean num.partitions?", "log.retention.ms")
	if rc != 1 {
		t.Fatalf("exit %d", rc)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the data dir was created for a refused config: %v", err)
	}
	// Every kind of problem in one file, all in one report, ordered by line, and
	// still nothing written.
	bad := `node_id: 1
data_dirr: /elsewhere
log: {levl: debug}
configs: {num.partiions: "3"}
modules:
  metadata: {use: raf}
  groups:
    offsets: {use: badger, dirr: /x}
    sweep_interval_ms: soon
  storage: {segmnt_bytes: 5}
  txn: {marker_concurrency: 0}
  stoarge: {}
`
	if err := os.WriteFile(cfgPath, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	rc = run([]string{"serve", "--config", cfgPath, "--data-dir", data}, &out, &errb)
	got := errb.String()
	wants := []string{
		"9 problems:",
		"configs: Unknown broker config name: num.partiions (did you mean num.partitions?)",
		"line 2: data_dirr: unknown key (did you mean data_dir?)",
		"line 3: log.levl: unknown key (did you mean level?)",
		`line 6: unknown module "raf" for modules.metadata (did you mean raft?) (known: raft)`,
		"line 8: groups.offsets.badger.dirr: unknown key (did you mean dir?)",
		"line 9: modules.groups: cannot unmarshal !!str `soon` into int64",
		"line 10: modules.storage.segmnt_bytes: unknown key (keys: dir,",
		"txn: marker_concurrency must be > 0",
		`line 12: unknown module role "stoarge" (did you mean storage?)`,
	}
	wantLines(t, got, wants...)
	last := -1
	for _, w := range wants[2:] {
		if i := strings.Index(got, w); i < last {
			t.Errorf("%q is out of line order in:\n%s", w, got)
		} else {
			last = i
		}
	}
	if rc != 1 {
		t.Fatalf("exit %d", rc)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the data dir was created for a refused config: %v", err)
	}
}

// The metadata module's settings (voters, raft_listen, raft's timeouts) are checked
// from the file before anything is written, like every other module's.
func TestServeMetadataConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, cfg, want string }{
		{"non-voter without raft_listen", "node_id: 4\nmodules: {metadata: {use: raft, voters: [\"1@127.0.0.1:19093\", \"2@127.0.0.1:19094\"]}}\n",
			"node 4 is not in voters"},
		{"voter listed twice", "modules: {metadata: {use: raft, voters: [\"1@127.0.0.1:19093\", \"1@127.0.0.1:19094\"]}}\n",
			"voter 1 listed twice"},
		{"lease longer than heartbeat", "modules: {metadata: {use: raft, heartbeat_timeout: 100ms, lease_timeout: 1s}}\n",
			"LeaderLeaseTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "sluice.yaml")
			if err := os.WriteFile(cfgPath, []byte(tc.cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			data := filepath.Join(dir, "data")
			var out, errb bytes.Buffer
			rc := run([]string{"serve", "--config", cfgPath, "--data-dir", data}, &out, &errb)
			if rc != 1 || !strings.Contains(errb.String(), tc.want) || !strings.Contains(errb.String(), "metadata.raft") {
				t.Fatalf("exit %d, stderr %q; want exit 1 and %q", rc, errb.String(), tc.want)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Fatalf("the data dir was created for a refused config: %v", err)
			}
		})
	}
}

// A share group (KIP-932) in the CLI: group list shows its type, describe its start
// offsets and lag, seek moves its start offsets once it is empty.
func TestKafkaCommandsShareGroup(t *testing.T) {
	b := testbroker.Start(t)
	addr := b.Addr
	mustCLI(t, addr, "topic", "create", "queue", "-p", "1")
	cl := b.Client(t, kgo.DefaultProduceTopic("queue"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "workers"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, c)
	iac.Resources = append(iac.Resources, res)
	if resp, err := iac.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("group config: %v %+v", err, resp)
	}
	sc := b.Client(t, kgo.ShareGroup("workers"), kgo.ConsumeTopics("queue"))
	got := 0
	for got < 5 && ctx.Err() == nil {
		sc.PollFetches(ctx).EachRecord(func(r *kgo.Record) { r.Ack(kgo.AckAccept); got++ })
	}
	if err := sc.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	wantLines(t, mustCLI(t, addr, "group", "list"), "workers  share")
	var described []struct {
		Type       string `json:"type"`
		Members    int    `json:"members"`
		Partitions []struct {
			Current int64 `json:"current_offset"`
			Lag     int64 `json:"lag"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, addr, "group", "describe", "workers", "--json")), &described); err != nil ||
		len(described) != 1 || described[0].Type != "share" || described[0].Members != 1 ||
		len(described[0].Partitions) != 1 || described[0].Partitions[0].Current != 5 || described[0].Partitions[0].Lag != 0 {
		t.Fatalf("describe --json: %v %+v", err, described)
	}
	wantLines(t, mustCLI(t, addr, "group", "describe", "workers"), "TYPE         share", "START-OFFSET  LAG")
	if rc, _, errs := cli(t, addr, "group", "seek", "workers", "--to", "start"); rc != 1 || !strings.Contains(errs, "stop its consumers first") {
		t.Fatalf("seek with a member: exit %d %s", rc, errs)
	}
	sc.Close()
	testbroker.WaitFor(t, 60*time.Second, "the share member gone", func() string {
		if out := mustCLI(t, addr, "group", "list"); !strings.Contains(out, "Empty") {
			return out
		}
		return ""
	})
	wantLines(t, mustCLI(t, addr, "group", "seek", "workers", "--to", "start"), "queue  0          0           ok")
	if err := json.Unmarshal([]byte(mustCLI(t, addr, "group", "describe", "workers", "--json")), &described); err != nil ||
		described[0].Partitions[0].Current != 0 || described[0].Partitions[0].Lag != 5 {
		t.Fatalf("describe after seek: %v %+v", err, described)
	}
}
