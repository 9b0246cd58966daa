package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// chromium returns the path of Debian's chromium; without it the test is skipped,
// except in CI (CI=true), where scripts/test.sh installs it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (scripts/test.sh installs Debian's chromium)")
	}
	t.Skip("chromium is not installed: apt-get install chromium")
	return ""
}

// headless runs chromium on url with args (--dump-dom, --screenshot=...) and returns
// its standard output. The flags keep it off the network and out of any profile.
func headless(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,900", "--virtual-time-budget=5000"}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), url)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// artifactDir is where screenshots are kept: $SLUICE_TEST_ARTIFACTS, else
// test-artifacts/ at the repository's top (ignored by git).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SLUICE_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
	}
	return resp.StatusCode
}

// The console in a real browser: the overview, a topic with its records (a JSON value
// pretty-printed), a group with a live member, its lag per partition and the lag
// chart. Asserts on the rendered DOM and keeps a screenshot of each page.
func TestConsoleInBrowser(t *testing.T) {
	bin := chromium(t)
	b := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		v := fmt.Sprintf(`{"order":%d,"item":"widget-%d"}`, i, i)
		r := &kgo.Record{Topic: "orders", Partition: 0, Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("browser-test")}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// A live member of "pickers", and "auditors" with offsets only, 6 records behind.
	member := b.Client(t, kgo.ConsumerGroup("pickers"), kgo.ConsumeTopics("orders"), kgo.ClientID("picker-1"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < 10; {
		fs := member.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	var o kadm.Offsets
	o.AddOffset("orders", 0, 4, -1)
	if _, err := adm.CommitOffsets(ctx, "auditors", o); err != nil {
		t.Fatal(err)
	}
	base := "http://" + b.AdminAddr
	// Two lag samples a second apart, so the chart has a line to draw.
	testbroker.WaitFor(t, 15*time.Second, "two lag samples of auditors", func() string {
		var g struct {
			History []any `json:"history"`
		}
		if code := getJSON(t, base+"/v1/console/groups/auditors", &g); code != 200 || len(g.History) < 2 {
			return fmt.Sprintf("HTTP %d, %d samples", code, len(g.History))
		}
		return ""
	})
	testbroker.WaitFor(t, 15*time.Second, "pickers stable with a member", func() string {
		var g struct {
			State   string `json:"state"`
			Members int    `json:"members"`
		}
		if code := getJSON(t, base+"/v1/console/groups/pickers", &g); code != 200 || g.State != "Stable" || g.Members != 1 {
			return fmt.Sprintf("HTTP %d %+v", code, g)
		}
		return ""
	})

	dir := artifactDir(t)
	for _, page := range []struct {
		name, hash string
		want       []string
	}{
		{"overview", "#/overview", []string{`id="brokers"`, "controller", "Under-replicated"}},
		{"topic", "#/topics/orders", []string{`id="partitions"`, `id="records"`, "widget-3", `"order": 3`, "source=browser-test", ">k3<"}},
		{"groups", "#/groups", []string{`id="groups"`, "pickers", "auditors", "Stable"}},
		{"group", "#/groups/auditors", []string{`id="lag"`, `class="lag"`, "<polyline", ">6<", "Lag per partition"}},
		{"member", "#/groups/pickers", []string{`id="members"`, "picker-1", "orders/0"}},
		{"extensions", "#/extensions", []string{`id="transforms"`, `id="plugins"`, "no transforms deployed"}},
	} {
		t.Run(page.name, func(t *testing.T) {
			dom := headless(t, bin, base+"/"+page.hash, "--dump-dom")
			if !strings.Contains(dom, `data-loaded="true"`) {
				t.Fatalf("the page did not finish loading:\n%s", dom)
			}
			for _, w := range page.want {
				if !strings.Contains(dom, w) {
					t.Errorf("the rendered page lacks %q:\n%s", w, dom)
				}
			}
			if strings.Contains(dom, `class="error"`) {
				t.Errorf("the page shows an error:\n%s", dom)
			}
			shot := filepath.Join(dir, "console-"+page.name+".png")
			headless(t, bin, base+"/"+page.hash, "--screenshot="+shot)
			f, err := os.Open(shot)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err != nil {
				t.Fatalf("screenshot %s: %v", shot, err)
			}
			if r := img.Bounds(); r.Dx() != 1280 || r.Dy() != 900 || img.At(10, 10) == img.At(640, 300) && img.At(640, 300) == img.At(1270, 890) {
				t.Fatalf("screenshot %s: %v, blank?", shot, r)
			}
		})
	}
}

// The transforms and plugins page with an assignor plugin running: its row, state and
// counters render (the page with nothing deployed is in TestConsoleInBrowser).
func TestConsoleExtensionsInBrowser(t *testing.T) {
	bin := chromium(t)
	plugin := filepath.Join(t.TempDir(), "rack-aware")
	if out, err := exec.Command("go", "build", "-o", plugin, "../../examples/assignors/rack-aware").CombinedOutput(); err != nil {
		t.Fatalf("build the example assignor: %v\n%s", err, out)
	}
	b := testbroker.Start(t, testbroker.WithConfig(fmt.Sprintf(
		"modules:\n  groups: {use: coordinator, assignors: [uniform, range, {name: rack-aware, plugin: %q}]}\n", plugin)))
	base := "http://" + b.AdminAddr
	testbroker.WaitFor(t, 30*time.Second, "the plugin running", func() string {
		var p struct {
			Plugins []struct{ Name, State string } `json:"plugins"`
		}
		if code := getJSON(t, base+"/v1/plugins", &p); code != 200 || len(p.Plugins) != 1 || p.Plugins[0].State != "running" {
			return fmt.Sprintf("HTTP %d %+v", code, p)
		}
		return ""
	})
	dom := headless(t, bin, base+"/#/extensions", "--dump-dom")
	for _, w := range []string{`id="plugins"`, ">rack-aware<", ">running<", ">uniform<", "Call rate", `id="transforms"`} {
		if !strings.Contains(dom, w) {
			t.Errorf("the rendered page lacks %q:\n%s", w, dom)
		}
	}
	if strings.Contains(dom, `class="error"`) {
		t.Errorf("the page shows an error:\n%s", dom)
	}
	headless(t, bin, base+"/#/extensions", "--screenshot="+filepath.Join(artifactDir(t), "console-extensions-plugin.png"))
}
