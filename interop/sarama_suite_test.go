package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Sarama's own functional tests (IBM/sarama, build tag functional, from the module
// cache) against Sluice, set up as sarama's CI sets up Kafka: five brokers (racks
// 1-5, default and internal-topic replication factor 2, no topic auto-creation),
// each reached by clients through a toxiproxy proxy on 127.0.0.1:2909N that the
// broker advertises (its EXTERNAL listener), brokers talking to each other directly.
// The tests that need docker compose skip themselves on an existing environment.

// toxiproxyVersion is the toxiproxy server the suite runs (go install, module proxy).
const toxiproxyVersion = "v2.5.0"

// saramaKafkaVersion is the Kafka version the suite is told the brokers are: the one
// whose protocol Sluice serves.
const saramaKafkaVersion = "4.1.0"

// saramaExpectedFailures are sarama tests that fail against Sluice, each with why.
var saramaExpectedFailures = map[string]string{}

// saramaShort is the short form (CI) of the suite: producers (plain, idempotent and
// transactional, across broker restarts) and clients, not the consumer groups (which
// the other interop tests cover) nor the admin calls.
const saramaShort = "^TestFunc(Producing|Txn|Idempotent|InitProducerId|MultiPartition|Client|Connection)"

// saramaSlow are the suite's longest tests (a minute and half a minute), left out
// unless SLUICE_CLIENT_SUITES=full.
var saramaSlow = []string{"TestFuncTxnProduceAndCommitOffset", "TestFuncConsumerGroupFuzzy"}

func TestSaramaSuite(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		need(t, "the go command is not on PATH")
	}
	needBroker(t)
	tp := startToxiproxy(t, goBin)

	// Five brokers, three of them raft voters; each has an EXTERNAL listener that the
	// proxy kafkaN forwards to.
	external := map[int32]int{}
	for id := int32(1); id <= 5; id++ {
		external[id] = freePort(t)
	}
	c := newClusterWith(t, 5, 3, nil, clusterOpt{
		configs: map[string]string{
			"listener.security.protocol.map":           "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
			"inter.broker.listener.name":               "PLAINTEXT",
			"default.replication.factor":               "2",
			"offsets.topic.replication.factor":         "2",
			"transaction.state.log.replication.factor": "2",
			"transaction.state.log.min.isr":            "1",
			"auto.create.topics.enable":                "false",
			"group.initial.rebalance.delay.ms":         "0",
		},
		listeners: func(id int32) string {
			return fmt.Sprintf(`[{name: PLAINTEXT, address: 127.0.0.1:0}, {name: EXTERNAL, address: "127.0.0.1:%d", advertised: "127.0.0.1:%d"}]`,
				external[id], 29090+id)
		},
		rack: func(id int32) string { return fmt.Sprint(id) },
	})
	for id := int32(1); id <= 5; id++ {
		tp.createProxy(t, fmt.Sprintf("kafka%d", id), fmt.Sprintf("127.0.0.1:%d", 29090+id), fmt.Sprintf("127.0.0.1:%d", external[id]))
	}
	c.startAll()
	c.waitAllSeeAll(90*time.Second, []int32{1, 2, 3, 4, 5})

	timeout := 20 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pattern := "^TestFunc"
	if !fullClientSuites() {
		pattern = saramaShort
	}
	if p := os.Getenv("SLUICE_SARAMA_RUN"); p != "" {
		pattern = p
	}
	args := []string{"test", "-tags", "functional", "-count=1", "-v", "-timeout", timeout.String(), "-run", pattern}
	if !fullClientSuites() {
		args = append(args, "-skip", "^("+strings.Join(saramaSlow, "|")+")$")
	}
	shim := newComposeShim(t, c)
	cmd, out := suiteCmd(t, ctx, goBin, "SLUICE_SARAMA_LOG", []string{"TOXIPROXY_ADDR=http://" + tp.addr,
		"KAFKA_VERSION=" + saramaKafkaVersion, "PATH=" + shim.dir + string(os.PathListSeparator) + os.Getenv("PATH")},
		append(args, "github.com/IBM/sarama")...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	runErr := shim.serve(done)
	log := out.String()
	checkSuite(t, "sarama", log, time.Since(start), runErr, saramaExpectedFailures)
}

// toxiproxy is a toxiproxy server process.
type toxiproxy struct{ addr string }

// startToxiproxy builds and starts a toxiproxy server on a free port.
func startToxiproxy(t *testing.T, goBin string) *toxiproxy {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	runCmd(t, runOpts{timeout: 5 * time.Minute, env: []string{"GOBIN=" + bin, "GOFLAGS=-mod=mod"}},
		goBin, "install", "github.com/Shopify/toxiproxy/v2/cmd/server@"+toxiproxyVersion)
	port := freePort(t)
	cmd := exec.Command(filepath.Join(bin, "server"), "-host", "127.0.0.1", "-port", fmt.Sprint(port))
	cmd.SysProcAttr = procAttr()
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killGroup(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	tp := &toxiproxy{addr: fmt.Sprintf("127.0.0.1:%d", port)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + tp.addr + "/version")
		if err == nil {
			resp.Body.Close()
			return tp
		}
		if time.Now().After(deadline) {
			t.Fatalf("toxiproxy did not answer: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// createProxy creates the proxy name from listen to upstream.
func (tp *toxiproxy) createProxy(t *testing.T, name, listen, upstream string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"name": name, "listen": listen, "upstream": upstream, "enabled": true})
	resp, err := http.Post("http://"+tp.addr+"/proxies", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create proxy %s: %s", name, resp.Status)
	}
}

// composeShim answers the docker compose commands sarama's tests run against the
// brokers (stop, start and logs of kafka-N) from this test: a "docker" script first on
// the suite's PATH forwards each to an HTTP listener here, and the test goroutine
// carries it out on the cluster (testing's Fatal must not run elsewhere).
type composeShim struct {
	c    *cluster
	dir  string // holds the docker script
	reqs chan composeReq
}

type composeReq struct {
	op, svc, since string
	reply          chan composeReply
}

type composeReply struct {
	status int
	body   string
}

func newComposeShim(t *testing.T, c *cluster) *composeShim {
	t.Helper()
	s := &composeShim{c: c, dir: t.TempDir(), reqs: make(chan composeReq)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(s.handle), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	script := fmt.Sprintf(`#!/bin/bash
# docker compose stop|start|logs kafka-N for sarama's functional tests, carried out
# by the Sluice interop test that runs them (interop/sarama_suite_test.go).
if [ "$1" != compose ]; then echo "sluice docker shim: only docker compose stop|start|logs" >&2; exit 125; fi
op=$2; shift 2; since=-
while [ $# -gt 1 ]; do case $1 in --since) since=$2; shift 2;; -*) shift;; *) break;; esac; done
exec 3<>/dev/tcp/127.0.0.1/%s || exit 125
printf 'GET /%%s/%%s/%%s HTTP/1.0\r\n\r\n' "$op" "$1" "$since" >&3
read -r _ code _ <&3
while IFS= read -r line <&3 && [ "${line%%$'\r'}" != "" ]; do :; done
cat <&3
[ "$code" = 200 ] || exit 1
`, port)
	if err := os.WriteFile(filepath.Join(s.dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *composeShim) handle(w http.ResponseWriter, r *http.Request) {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) != 3 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	req := composeReq{op: parts[0], svc: parts[1], since: parts[2], reply: make(chan composeReply, 1)}
	select {
	case s.reqs <- req:
	case <-time.After(5 * time.Minute):
		http.Error(w, "the test is not listening", http.StatusServiceUnavailable)
		return
	}
	rep := <-req.reply
	w.WriteHeader(rep.status)
	_, _ = io.WriteString(w, rep.body)
}

// serve carries out the shim's requests until done yields the suite's exit.
func (s *composeShim) serve(done <-chan error) error {
	for {
		select {
		case err := <-done:
			return err
		case req := <-s.reqs:
			req.reply <- s.do(req)
		}
	}
}

func (s *composeShim) do(req composeReq) composeReply {
	var id int32
	if _, err := fmt.Sscanf(req.svc, "kafka-%d", &id); err != nil || id < 1 || int(id) > len(s.c.nodes) {
		return composeReply{http.StatusNotFound, "no such service " + req.svc + "\n"}
	}
	n := s.c.node(id)
	switch req.op {
	case "stop":
		n.stop()
	case "start":
		if !n.running() {
			n.start()
		}
	case "logs":
		return composeReply{http.StatusOK, logSince(n.stderr.String(), req.since)}
	default:
		return composeReply{http.StatusBadRequest, "unsupported: docker compose " + req.op + "\n"}
	}
	return composeReply{http.StatusOK, ""}
}

// logSince keeps the lines of a broker's log stamped at or after since (RFC 3339;
// "-" keeps all), and lines without a stamp.
func logSince(log, since string) string {
	from, err := time.Parse(time.RFC3339, since)
	if err != nil {
		return log
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(log, "\n") {
		if i := strings.Index(line, "time="); i >= 0 {
			f := strings.Fields(line[i+len("time="):])
			if len(f) > 0 {
				if ts, err := time.Parse(time.RFC3339Nano, f[0]); err == nil && ts.Before(from) {
					continue
				}
			}
		}
		b.WriteString(line)
	}
	return b.String()
}
