package interop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The defaults a bare `sluice serve` listens on.
const (
	defaultAddr      = "127.0.0.1:9092"
	defaultAdminAddr = "127.0.0.1:9644"
)

// firstReadmeCommand returns the first command of the first shell-like fenced block of a
// README (```sh, bash, shell, console or no language): its first line that is not blank
// or a comment, without a leading "$ ".
func firstReadmeCommand(readme []byte) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(readme))
	inBlock, shell := false, false
	fence := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !inBlock {
			if strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~") {
				fence = line[:3]
				lang := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "`~")))
				inBlock = true
				switch lang {
				case "", "sh", "bash", "shell", "console", "shell-session", "zsh":
					shell = true
				default:
					shell = false
				}
			}
			continue
		}
		if strings.HasPrefix(line, fence) {
			inBlock = false
			continue
		}
		if !shell || line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		return strings.TrimSpace(strings.TrimPrefix(line, "$ ")), true
	}
	return "", false
}

func TestFirstReadmeCommandParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, readme, want string
		ok                 bool
	}{
		{"plain", "# X\n\n```sh\ngo run ./cmd/sluice serve\n```\n", "go run ./cmd/sluice serve", true},
		{"prompt and comment", "```console\n# start it\n$ go run ./cmd/sluice serve\nother\n```", "go run ./cmd/sluice serve", true},
		{"yaml block first", "```yaml\nnode_id: 1\n```\n~~~\nmake\n~~~\n", "make", true},
		{"none", "just text\n", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := firstReadmeCommand([]byte(tc.readme))
			if got != tc.want || ok != tc.ok {
				t.Errorf("firstReadmeCommand = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// readmeBlock returns the commands of the first shell block after the line that starts
// with heading in the README: its lines that are not blank or comments, a trailing "# ..." comment kept
// (bash ignores it).
func readmeBlock(t *testing.T, readme []byte, heading string) []string {
	t.Helper()
	_, section, ok := strings.Cut(string(readme), "\n"+heading)
	if !ok {
		t.Fatalf("README.md has no %q heading", heading)
	}
	var cmds []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in && line == "```sh":
			in = true
		case in && strings.HasPrefix(line, "```"):
			return cmds
		case in && line != "" && !strings.HasPrefix(line, "#"):
			cmds = append(cmds, line)
		}
	}
	t.Fatalf("README.md: no closed ```sh block under %q", heading)
	return nil
}

// readmeProc is a long-running README command: a bash process group.
type readmeProc struct {
	t       *testing.T
	command string
	cmd     *exec.Cmd
	out     *syncBuffer
	done    chan struct{}
	err     error
	stopped bool
}

// startReadme starts command with bash in the repository root, in a process group of
// its own, stdout and stderr into one buffer; the test's end kills what is left.
func startReadme(t *testing.T, command string, env []string) *readmeProc {
	t.Helper()
	p := &readmeProc{t: t, command: command, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command("bash", "-c", command)
	p.cmd.Dir = repoRoot
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	p.cmd.SysProcAttr = procAttr()
	t.Logf("starting the README's %q", command)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %q: %v", command, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("output of %q:\n%s", command, tail(p.out.String(), 200))
		}
		for _, bad := range []string{"WARNING: DATA RACE", "panic: ", "fatal error: "} {
			if strings.Contains(p.out.String(), bad) {
				t.Errorf("output of %q contains %q", command, bad)
			}
		}
	})
	return p
}

// kill SIGKILLs the whole group and waits for it.
func (p *readmeProc) kill() {
	if !p.stopped {
		killGroup(p.cmd.Process.Pid)
		<-p.done
		p.stopped = true
	}
}

// term SIGTERMs the whole group; every process in it must be gone soon.
func (p *readmeProc) term() {
	p.t.Helper()
	pid := p.cmd.Process.Pid
	termGroup(pid)
	if !pollUntil(20*time.Second, func() bool { return !groupAlive(pid) }) {
		p.t.Errorf("processes of %q still running 20s after SIGTERM; killing them", p.command)
	}
	p.kill()
}

// waitOutput polls until the output holds every one of want.
func (p *readmeProc) waitOutput(timeout time.Duration, want ...string) {
	p.t.Helper()
	has := func() bool {
		for _, w := range want {
			if !strings.Contains(p.out.String(), w) {
				return false
			}
		}
		return true
	}
	if !pollUntil(timeout, has) {
		p.t.Fatalf("%q did not print %q within %s:\n%s", p.command, want, timeout, tail(p.out.String(), 50))
	}
}

// runReadmeLine runs one README line with bash -o pipefail in the repository root and
// returns its stdout and stderr.
func runReadmeLine(t *testing.T, line string, env []string) string {
	t.Helper()
	return runCmd(t, runOpts{timeout: 2 * time.Minute, dir: repoRoot, env: env},
		"bash", "-o", "pipefail", "-c", "exec 2>&1\n"+line)
}

// TestReadmeCommands runs the README's commands exactly as a newcomer would, from the
// repository root with an empty HOME, against the broker its first command starts on
// the default addresses: the first command (it must build and start a broker); the
// kcat quickstart; the group example twice (the second run resumes); the CLI
// quickstart; a kill -9 as the README says, a restart, and every record still there;
// the transform quickstart. The default data dir (./data) and the transform's
// redact.wasm are removed afterwards if the commands created them.
func TestReadmeCommands(t *testing.T) {
	needBroker(t)
	kcat := needKcat(t)
	if _, err := exec.LookPath("curl"); err != nil {
		need(t, "curl is not installed (scripts/test.sh installs it): %v", err)
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	first, ok := firstReadmeCommand(readme)
	if !ok {
		t.Fatalf("README.md has no shell command in a fenced block")
	}
	if !strings.Contains(first, "serve") || strings.Contains(first, "go run") {
		t.Fatalf("README.md's first command %q should build the binary and start a broker with it (go run does not pass signals on)", first)
	}
	for _, a := range []string{defaultAddr, defaultAdminAddr} {
		l, err := net.Listen("tcp", a)
		if err != nil {
			need(t, "%s is in use (another broker running?), cannot run the README's command: %v", a, err)
		}
		l.Close()
	}
	// Only what the commands created is removed: others may be editing this checkout.
	for _, name := range []string{"data", "redact.wasm"} {
		path := filepath.Join(repoRoot, name)
		if _, err := os.Stat(path); err == nil {
			t.Logf("%s already exists; the README's commands will use it and it is left in place", path)
			continue
		}
		t.Cleanup(func() {
			if _, err := os.Stat(path); err == nil {
				if err := os.RemoveAll(path); err != nil {
					t.Errorf("remove %s: %v", path, err)
				}
			}
		})
	}
	// HOME is empty, but the Go caches stay where they are (no re-download, no rebuild).
	env := []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=", "XDG_DATA_HOME=", "XDG_CACHE_HOME=", "SLUICE_BROKERS=", "SLUICE_ADMIN="}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		env = append(env, k+"="+strings.TrimSpace(string(out)))
	}

	broker := startReadme(t, first, env)
	waitReady(t, defaultAdminAddr, broker.done, 5*time.Minute) // the first build compiles everything
	out := run(t, 30*time.Second, "", kcat, "-b", defaultAddr, "-L", "-J")
	var md kcatMetadata
	if err := json.Unmarshal([]byte(out), &md); err != nil {
		t.Fatalf("kcat -L -J: bad JSON: %v\n%s", err, out)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].ID != 1 || md.Brokers[0].Name != defaultAddr {
		t.Errorf("kcat -b %s -L lists brokers %+v, want exactly broker 1 at %s", defaultAddr, md.Brokers, defaultAddr)
	}

	var all strings.Builder
	for _, line := range readmeBlock(t, readme, "## Quickstart with kcat") {
		all.WriteString(runReadmeLine(t, line, env))
	}
	for _, want := range []string{"broker 1 at " + defaultAddr, "k1=hello source=readme @0", "k2=world source=readme @1", "ready"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("the kcat quickstart's output lacks %q:\n%s", want, all.String())
		}
	}

	// The group example: the first run reads what is there; after it stops, a second
	// run resumes, so it prints a new record and none of the old ones.
	groupCmds := readmeBlock(t, readme, "Consume as a group")
	if len(groupCmds) != 1 {
		t.Fatalf("the group example should be one command, got %q", groupCmds)
	}
	// kcat's records go to a pipe here, so they show when it exits; its "Reached end"
	// line (stderr, unbuffered) says when it has read all.
	g := startReadme(t, groupCmds[0], env)
	g.waitOutput(60*time.Second, "Reached end of topic demo [0] at offset 2")
	g.term()
	if out := g.out.String(); !strings.Contains(out, "hello\nworld\n") {
		t.Errorf("the first group run did not print the records:\n%s", out)
	}
	run(t, 30*time.Second, "again\n", kcat, "-b", defaultAddr, "-P", "-t", "demo")
	g = startReadme(t, groupCmds[0], env)
	g.waitOutput(60*time.Second, "Reached end of topic demo [0] at offset 3")
	g.term()
	if out := g.out.String(); !strings.Contains(out, "again\n") || strings.Contains(out, "hello") {
		t.Errorf("the second group run did not resume where the first stopped:\n%s", out)
	}

	all.Reset()
	for _, line := range readmeBlock(t, readme, "## Quickstart with the sluice CLI") {
		all.WriteString(runReadmeLine(t, line, env))
	}
	for _, want := range []string{
		"orders  created", "produced 2 records to orders",
		"k1=hello source=readme (partition", "k2=world source=readme (partition",
		"GROUP        readers", "TOTAL-LAG    1", "retention.ms  86400000", "HEALTHY                      true",
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("the CLI quickstart's output lacks %q:\n%s", want, all.String())
		}
	}

	// kill -9 as the README says, start again, and every record is there.
	kill := regexp.MustCompile("`(pkill -9[^`]*)`").FindStringSubmatch(string(readme))
	restart := regexp.MustCompile("start it again \\(`([^`]*)`\\)").FindStringSubmatch(string(readme))
	if kill == nil || restart == nil {
		t.Fatalf("README.md should say how to kill -9 the broker and start it again")
	}
	// The README's pkill, restricted to this test's process group: other tests may run
	// brokers of the same name meanwhile.
	if kill[1] != "pkill -9 -x sluice" {
		t.Fatalf("the README kills the broker with %q; this test knows how to run only pkill -9 -x sluice", kill[1])
	}
	runReadmeLine(t, fmt.Sprintf("%s -g %d", kill[1], broker.cmd.Process.Pid), env)
	select {
	case <-broker.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%q did not stop the broker", kill[1])
	}
	broker.stopped = true
	broker = startReadme(t, restart[1], env)
	waitReady(t, defaultAdminAddr, broker.done, time.Minute)
	// Ready can come a moment before the partition has its leader again: poll.
	var got string
	if !pollUntil(30*time.Second, func() bool {
		b, err := exec.Command(kcat, "-b", defaultAddr, "-C", "-t", "demo", "-o", "beginning", "-e", "-q", "-f", "%s\n").Output()
		got = string(b)
		return err == nil && got == "hello\nworld\nagain\n"
	}) {
		t.Errorf("after kill -9 and a restart, demo holds %q", got)
	}

	all.Reset()
	for _, line := range readmeBlock(t, readme, "Deploy a WASM record transform") {
		all.WriteString(runReadmeLine(t, line, env))
	}
	if !strings.Contains(all.String(), "redact") || !strings.Contains(all.String(), `{"name":"ann","ssn":"***"}`) {
		t.Errorf("the transform quickstart's output lacks the deployment or the redacted record:\n%s", all.String())
	}
	broker.term()
}
