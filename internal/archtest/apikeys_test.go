package archtest

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// keyFileName is a Kafka API key's own file: "11_join_group.go".
var keyFileName = regexp.MustCompile(`^(\d+)_([a-z_]+)\.go$`)

// keyFileHeader is the first line of a key's file: "// JoinGroup: v0-v9. ..." (or
// "v0-9", or "v0" for one version).
var keyFileHeader = regexp.MustCompile(`^// (\w+): v(\d+)(?:-v?(\d+))?\b`)

// claimLiteral is a claim written in a key's file (kernel.Claim{Key: kmsg.JoinGroup,
// Min: 0, Max: 9, ...}; the kernel's own file writes Claim{...}).
var claimLiteral = regexp.MustCompile(`Claim\{Key: kmsg\.(\w+), Min: (\d+), Max: (\d+)`)

// versions is an API key's version range.
type versions struct{ min, max int16 }

func (v versions) String() string { return fmt.Sprintf("v%d-v%d", v.min, v.max) }

// keyFile is what one NN_name.go says about its key.
type keyFile struct {
	path  string // relative to the repository root
	key   int16
	name  string   // the name in the header: "JoinGroup"
	vers  versions // the header's range
	claim *versions
}

// TestAPIKeyFiles checks that what a standard broker advertises in ApiVersions, over a
// real socket, is what the modules claimed (kernel.Kernel.Claims) and what the key
// files' headers say: every advertised key has exactly one NN_name.go (NN its number)
// whose header names the key and its advertised versions, and every such file's key
// is advertised. A claim literal in a key's file must name the same key and versions.
func TestAPIKeyFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	files := keyFiles(t, repoRoot(t))
	// auth.acl, not the default auth.none: its API keys are advertised only with it.
	b := testbroker.Start(t, testbroker.WithConfig("modules:\n  auth: {use: acl}\n"))
	advertised := apiVersions(t, b)

	claimed := map[int16]versions{}
	for _, c := range b.Kernel.Claims() {
		claimed[c.Key.Int16()] = versions{c.Min, c.Max}
	}
	for key, v := range advertised {
		if c, ok := claimed[key]; !ok || c != v {
			t.Errorf("key %d (%s): ApiVersions advertises %v, the claims say %v (claimed %v)", key, kmsg.NameForKey(key), v, c, ok)
		}
	}
	for key, c := range claimed {
		if _, ok := advertised[key]; !ok {
			t.Errorf("key %d (%s): claimed %v but not advertised", key, kmsg.NameForKey(key), c)
		}
	}

	byKey := map[int16][]keyFile{}
	for _, f := range files {
		byKey[f.key] = append(byKey[f.key], f)
	}
	for key, v := range advertised {
		fs := byKey[key]
		switch {
		case len(fs) == 0:
			t.Errorf("key %d (%s): advertised %v but no %02d_name.go file", key, kmsg.NameForKey(key), v, key)
			continue
		case len(fs) > 1:
			var paths []string
			for _, f := range fs {
				paths = append(paths, f.path)
			}
			t.Errorf("key %d (%s): %d files: %s", key, kmsg.NameForKey(key), len(fs), strings.Join(paths, ", "))
		}
		for _, f := range fs {
			if f.vers != v {
				t.Errorf("%s: header says %v, ApiVersions advertises %v", f.path, f.vers, v)
			}
		}
	}
	// The kernel serves SaslHandshake and SaslAuthenticate only when the auth module is
	// a kernel.Authenticator, which the test broker's auth.none is not.
	withAuthenticator := map[int16]bool{kmsg.SASLHandshake.Int16(): true, kmsg.SASLAuthenticate.Int16(): true}
	for _, f := range files {
		if _, ok := advertised[f.key]; !ok && !withAuthenticator[f.key] {
			t.Errorf("%s: key %d is not advertised", f.path, f.key)
		}
		switch {
		case f.claim == nil:
			t.Errorf("%s: no kernel.Claim literal (the key's versions are written in its file)", f.path)
		case *f.claim != f.vers:
			t.Errorf("%s: claim literal %v, header %v", f.path, *f.claim, f.vers)
		}
	}
}

// repoRoot is the directory of the broker's go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("go env GOMOD: not in a module")
	}
	return filepath.Dir(gomod)
}

// keyFiles reads every NN_name.go under the kernel and the modules and checks what can
// be checked without a broker: the header is there, names the key numbered NN, and the
// file's name is the key's name.
func keyFiles(t *testing.T, root string) []keyFile {
	t.Helper()
	var files []keyFile
	for _, dir := range []string{"kernel", "modules", "transforms"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			m := keyFileName.FindStringSubmatch(d.Name())
			if m == nil || strings.HasSuffix(d.Name(), "_test.go") {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			f, ok := readKeyFile(t, path, rel, m[1], m[2])
			if ok {
				files = append(files, f)
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatalf("walk %s: %v", dir, err)
		}
	}
	if len(files) < 10 {
		t.Fatalf("found only %d NN_name.go files under %s", len(files), root)
	}
	return files
}

func readKeyFile(t *testing.T, path, rel, number, snake string) (keyFile, bool) {
	t.Helper()
	n, err := strconv.ParseInt(number, 10, 16)
	if err != nil {
		t.Errorf("%s: key number %q: %v", rel, number, err)
		return keyFile{}, false
	}
	f := keyFile{path: rel, key: int16(n)}
	want := kafkaName(f.key)
	if want == "Unknown" || want == "" {
		t.Errorf("%s: %d is no Kafka API key", rel, n)
		return keyFile{}, false
	}
	if strings.ReplaceAll(snake, "_", "") != strings.ToLower(want) {
		t.Errorf("%s: key %d is %s: want a file named %02d_%s.go", rel, n, want, n, snakeCase(want))
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	first, _, _ := strings.Cut(string(src), "\n")
	h := keyFileHeader.FindStringSubmatch(first)
	if h == nil {
		t.Errorf("%s: first line %q is not a header like \"// %s: v0-v3. Not implemented: ...\"", rel, first, want)
		return keyFile{}, false
	}
	f.name = h[1]
	if !strings.EqualFold(f.name, want) {
		t.Errorf("%s: header names %s, key %d is %s", rel, f.name, n, want)
	}
	f.vers.min = parseVersion(t, rel, h[2])
	f.vers.max = f.vers.min
	if h[3] != "" {
		f.vers.max = parseVersion(t, rel, h[3])
	}
	if c := claimLiteral.FindAllStringSubmatch(string(src), -1); len(c) > 0 {
		if len(c) > 1 {
			t.Errorf("%s: %d claim literals, want one", rel, len(c))
		}
		// The literal names kmsg's constant, which is Kafka's name but for key 45
		// (kmsg.AlterPartitionAssignments).
		if !strings.EqualFold(c[0][1], want) && c[0][1] != kmsg.NameForKey(f.key) {
			t.Errorf("%s: claims kmsg.%s, the file is key %d (%s)", rel, c[0][1], n, want)
		}
		f.claim = &versions{parseVersion(t, rel, c[0][2]), parseVersion(t, rel, c[0][3])}
	}
	return f, true
}

// kafkaName is the key's name as Kafka spells it, up to case (kmsg's InitProducerID is
// Kafka's InitProducerId).
func kafkaName(key int16) string {
	if key == kmsg.AlterPartitionAssignments.Int16() {
		return "AlterPartitionReassignments" // kmsg shortens it
	}
	return kmsg.NameForKey(key)
}

func parseVersion(t *testing.T, rel, s string) int16 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 16)
	if err != nil {
		t.Errorf("%s: version %q: %v", rel, s, err)
	}
	return int16(v)
}

// snakeCase turns "OffsetForLeaderEpoch" into "offset_for_leader_epoch" and
// "InitProducerID" into "init_producer_id".
func snakeCase(name string) string {
	var b strings.Builder
	for i, r := range name {
		upper := r >= 'A' && r <= 'Z'
		if upper && i > 0 && !(name[i-1] >= 'A' && name[i-1] <= 'Z') {
			b.WriteByte('_')
		}
		b.WriteString(strings.ToLower(string(r)))
	}
	return b.String()
}

// apiVersions asks the broker for its ApiVersions with a franz-go client (over a real
// socket, at the newest version both sides know) and returns each key's range.
func apiVersions(t *testing.T, b *testbroker.Broker) map[int16]versions {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, b.Client(t))
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions: error code %d", resp.ErrorCode)
	}
	out := map[int16]versions{}
	for _, k := range resp.ApiKeys {
		if _, dup := out[k.ApiKey]; dup {
			t.Errorf("ApiVersions lists key %d twice", k.ApiKey)
		}
		out[k.ApiKey] = versions{k.MinVersion, k.MaxVersion}
	}
	if len(out) == 0 {
		t.Fatal("ApiVersions advertises no key")
	}
	return out
}
