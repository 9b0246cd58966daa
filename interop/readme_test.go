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

// TestReadmeFirstCommand runs the README's first command exactly as a newcomer would, from
// the repository root with an empty HOME, waits for the default admin listener's /readyz,
// and checks that `kcat -b 127.0.0.1:9092 -L` lists broker 1. The default data dir
// (./data) is removed afterwards if the command created it.
func TestReadmeFirstCommand(t *testing.T) {
	needBroker(t)
	kcat := needKcat(t)
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Skipf("no README.md yet (%v): nothing to check", err)
	}
	command, ok := firstReadmeCommand(readme)
	if !ok {
		t.Fatalf("README.md has no shell command in a fenced block")
	}
	if !strings.Contains(command, "serve") {
		t.Fatalf("README.md's first command %q does not start a broker (want e.g. `go run ./cmd/sluice serve`)", command)
	}
	for _, a := range []string{defaultAddr, defaultAdminAddr} {
		l, err := net.Listen("tcp", a)
		if err != nil {
			need(t, "%s is in use (another broker running?), cannot run the README's command: %v", a, err)
		}
		l.Close()
	}

	// The default data dir is ./data: remove it afterwards if the command created it.
	// Nothing else is touched (others may be editing this checkout meanwhile).
	dataDir := filepath.Join(repoRoot, "data")
	if _, err := os.Stat(dataDir); err == nil {
		t.Logf("%s already exists; the README's command will use it and it is left in place", dataDir)
	} else {
		t.Cleanup(func() {
			if _, err := os.Stat(dataDir); err == nil {
				t.Logf("removing %s, created by the README's command", dataDir)
				if err := os.RemoveAll(dataDir); err != nil {
					t.Errorf("remove %s: %v", dataDir, err)
				}
			}
		})
	}

	// HOME is empty, but the Go caches stay where they are (no re-download, no rebuild).
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=", "XDG_DATA_HOME=", "XDG_CACHE_HOME="}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		env = append(env, k+"="+strings.TrimSpace(string(out)))
	}
	stderr := &syncBuffer{}
	cmd := exec.Command("bash", "-c", command)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = stderr
	cmd.Stderr = stderr
	cmd.SysProcAttr = procAttr()
	t.Logf("running the README's first command in %s: %s", repoRoot, command)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %q: %v", command, err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	pid := cmd.Process.Pid
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			killGroup(pid)
			<-done
		}
		if t.Failed() {
			t.Logf("output of %q:\n%s", command, tail(stderr.String(), 200))
		}
		for _, bad := range []string{"WARNING: DATA RACE", "panic: ", "fatal error: "} {
			if strings.Contains(stderr.String(), bad) {
				t.Errorf("output of %q contains %q", command, bad)
			}
		}
	})

	waitReady(t, defaultAdminAddr, done, 3*time.Minute) // go run may compile first

	out := run(t, 30*time.Second, "", kcat, "-b", defaultAddr, "-L", "-J")
	var md kcatMetadata
	if err := json.Unmarshal([]byte(out), &md); err != nil {
		t.Fatalf("kcat -L -J: bad JSON: %v\n%s", err, out)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].ID != 1 || md.Brokers[0].Name != defaultAddr {
		t.Errorf("kcat -b %s -L lists brokers %+v, want exactly broker 1 at %s", defaultAddr, md.Brokers, defaultAddr)
	}
	plain := run(t, 30*time.Second, "", kcat, "-b", defaultAddr, "-L")
	if want := "broker 1 at " + defaultAddr; !strings.Contains(plain, want) {
		t.Errorf("kcat -L output lacks %q:\n%s", want, plain)
	}

	// SIGTERM to the whole group (go run and the broker); the broker must be gone soon.
	termGroup(pid)
	if !pollUntil(20*time.Second, func() bool { return !groupAlive(pid) }) {
		killGroup(pid)
		t.Errorf("processes of %q still running 20s after SIGTERM; killed them", command)
	}
	<-done
	stopped = true
	t.Logf("%q exited after SIGTERM: %v", command, fmt.Sprint(waitErr))
}
