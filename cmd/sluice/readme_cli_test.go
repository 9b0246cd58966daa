package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// readmeCLIBlock returns the commands of the first shell block under the README's
// "Quickstart with the sluice CLI" heading.
func readmeCLIBlock(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Quickstart with the sluice CLI")
	if !ok {
		t.Fatal(`README.md has no "Quickstart with the sluice CLI" section`)
	}
	var cmds []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in && strings.HasPrefix(line, "```sh"):
			in = true
		case in && strings.HasPrefix(line, "```"):
			return cmds
		case in && line != "" && !strings.HasPrefix(line, "#"):
			cmds = append(cmds, line)
		}
	}
	t.Fatal("the CLI quickstart has no closed ```sh block")
	return nil
}

// The README's CLI quickstart, run line by line with bash against a real broker, the
// binary built as the README says.
func TestReadmeCLIQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	cmds := readmeCLIBlock(t)
	if len(cmds) < 2 || cmds[0] != "go build -o bin/sluice ./cmd/sluice" {
		t.Fatalf("the quickstart should start by building bin/sluice, got %q", cmds)
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b := testbroker.Start(t)
	var all bytes.Buffer
	for _, c := range cmds[1:] {
		sh := exec.Command("bash", "-o", "pipefail", "-c", strings.ReplaceAll(c, "bin/sluice", bin))
		sh.Env = append(os.Environ(), envBrokers+"="+b.Addr)
		out, err := sh.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
		all.Write(out)
	}
	for _, want := range []string{
		"orders  created",
		"produced 2 records to orders",
		"k1=hello source=readme (partition",
		"k2=world source=readme (partition",
		"GROUP        readers", "TOTAL-LAG    1",
		"retention.ms  86400000",
		"HEALTHY                      true",
	} {
		if !strings.Contains(all.String(), want) {
			t.Fatalf("the quickstart's output lacks %q:\n%s", want, all.String())
		}
	}
}
