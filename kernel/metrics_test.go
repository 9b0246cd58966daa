package kernel

import (
	"strings"
	"testing"
)

func TestMetricsCollect(t *testing.T) {
	m := NewMetrics()
	m.Counter("sluice_a_total", "a").Add(2)
	samples := []string{"x", "y"}
	m.Collect("sluice_b_total", "b per thing", "counter", func(emit func(string, float64)) {
		for i, s := range samples {
			emit(`thing="`+s+`"`, float64(i+1))
		}
	})
	m.Collect("sluice_c", "c", "gauge", func(emit func(string, float64)) { emit("", 7) })
	var sb strings.Builder
	m.WriteText(&sb)
	want := `# HELP sluice_a_total a
# TYPE sluice_a_total counter
sluice_a_total 2
# HELP sluice_b_total b per thing
# TYPE sluice_b_total counter
sluice_b_total{thing="x"} 1
sluice_b_total{thing="y"} 2
# HELP sluice_c c
# TYPE sluice_c gauge
sluice_c 7
`
	if sb.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", sb.String(), want)
	}
	// Samples come and go with what fn lists.
	samples = samples[:1]
	sb.Reset()
	m.WriteText(&sb)
	if strings.Contains(sb.String(), `thing="y"`) || !strings.Contains(sb.String(), `sluice_b_total{thing="x"} 1`) {
		t.Fatalf("after removing y:\n%s", sb.String())
	}
}
