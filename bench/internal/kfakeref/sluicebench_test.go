package kfakeref

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchTool builds the broker module's load tool, cmd/sluice-bench, into a temp dir
// (this module cannot import it: it is another module's main package).
func benchTool(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds cmd/sluice-bench")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is not in PATH: cannot build cmd/sluice-bench")
	}
	bin := filepath.Join(t.TempDir(), "sluice-bench")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sluice-bench")
	build.Dir = filepath.Join("..", "..", "..") // the repository root, the broker's module
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sluice-bench: %v\n%s", err, out)
	}
	return bin
}

// benchLine is the part of sluice-bench's JSON line these tests read.
type benchLine struct {
	Tool    string  `json:"tool"`
	Mode    string  `json:"mode"`
	Records int64   `json:"records"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	Errors  int64   `json:"errors"`
}

// runBench runs the tool and returns its JSON line, failing the test on a non-zero exit,
// on other than one JSON line, or on a line that does not parse.
func runBench(t *testing.T, bin string, args ...string) benchLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append(args, "--timeout", "50s")...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("sluice-bench %v: %v\nstdout: %s\nstderr: %s", args, err, out.String(), errb.String())
	}
	var lines []string
	for l := range strings.SplitSeq(out.String(), "\n") {
		if strings.HasPrefix(l, "{") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("sluice-bench %v: %d JSON lines, want 1:\n%s", args, len(lines), out.String())
	}
	var r benchLine
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatalf("JSON line does not parse: %v\n%s", err, lines[0])
	}
	if r.Tool != "sluice-bench" || r.Mode != args[0] || r.Errors != 0 || r.Seconds <= 0 {
		t.Fatalf("result: %+v", r)
	}
	return r
}

// sluice-bench against the reference brokers of scripts/bench.sh: kfake storing
// records, and the ceiling that discards them (its consumer reads synthetic records).
func TestSluiceBenchAgainstKfake(t *testing.T) {
	bin := benchTool(t)
	ref, err := Start(Options{Mode: Reference, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	addr := ref.ListenAddrs()[0]
	p := runBench(t, bin, "produce", "--brokers", addr, "--topic", "k", "--records", "2000", "--partitions", "2", "--progress", "0")
	c := runBench(t, bin, "consume", "--brokers", addr, "--topic", "k", "--progress", "0")
	if p.Records != 2000 || c.Records != 2000 || c.Bytes != p.Bytes {
		t.Fatalf("kfake reference: produced %d (%d B), consumed %d (%d B)", p.Records, p.Bytes, c.Records, c.Bytes)
	}

	ceil, err := Start(Options{Mode: Ceiling, SyntheticRecordBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer ceil.Close()
	addr = ceil.ListenAddrs()[0]
	p = runBench(t, bin, "produce", "--brokers", addr, "--topic", "k", "--records", "2000", "--progress", "0", "--acks", "all")
	if p.Records != 2000 {
		t.Fatalf("ceiling produce: %d", p.Records)
	}
	c = runBench(t, bin, "consume", "--brokers", addr, "--topic", "k", "--records", "5000", "--partitions", "1", "--progress", "0")
	if c.Records < 5000 || c.Bytes < 5000*100 {
		t.Fatalf("ceiling consume: %d records %d bytes", c.Records, c.Bytes)
	}
}
