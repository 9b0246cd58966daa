package metricstest_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/metricstest"
	"github.com/sluicehq/sluice/internal/testbroker"
)

// docs/metrics.md lists every family a broker serves, and names no family the code
// does not define.
func TestMetricsDocumented(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(sluice_[a-z0-9_]+)`").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}

	b := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.Client(t, kgo.DefaultProduceTopic("doc"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var o kadm.Offsets
	o.AddOffset("doc", 0, 0, -1)
	if _, err := b.Admin(t).CommitOffsets(ctx, "doc-readers", o); err != nil {
		t.Fatal(err)
	}
	for name := range metricstest.Scrape(t, b.AdminAddr) {
		if strings.HasPrefix(name, "sluice_") && !documented[name] {
			t.Errorf("%s is served but not in docs/metrics.md", name)
		}
	}

	// Every documented name is in the code (a string of some non-test Go file).
	var code strings.Builder
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			code.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range documented {
		if !strings.Contains(code.String(), `"`+name+`"`) {
			t.Errorf("docs/metrics.md lists %s, which no Go file defines", name)
		}
	}
}
