package metadata

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClaims: the module claims (and so ApiVersions advertises) exactly these ranges,
// and each key's NN_name.go file opens with the range its claim literal holds.
func TestClaims(t *testing.T) {
	want := map[kmsg.Key][2]int16{
		kmsg.Metadata:                   {0, 13},
		kmsg.CreateTopics:               {0, 7},
		kmsg.DeleteTopics:               {0, 6},
		kmsg.DescribeConfigs:            {0, 4},
		kmsg.AlterConfigs:               {0, 2},
		kmsg.CreatePartitions:           {0, 3},
		kmsg.IncrementalAlterConfigs:    {0, 1},
		kmsg.DescribeCluster:            {0, 2},
		kmsg.DescribeQuorum:             {0, 2},
		kmsg.ElectLeaders:               {0, 2},
		kmsg.AlterPartitionAssignments:  {0, 1},
		kmsg.ListPartitionReassignments: {0, 0},
		kmsg.UpdateFeatures:             {0, 2},
		kmsg.DescribeTopicPartitions:    {0, 0},
		kmsg.UnregisterBroker:           {0, 0},
		kmsg.ListConfigResources:        {0, 1},
		kmsg.AddRaftVoter:               {0, 1},
		kmsg.RemoveRaftVoter:            {0, 0},
		kmsg.UpdateRaftVoter:            {0, 0},
	}
	fc := newFakeContext(t, 1, t.TempDir())
	m := Info().New().(*Module)
	if err := m.Provision(fc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Cleanup() })
	if len(fc.versions) != len(want) {
		t.Errorf("%d keys claimed, want %d: %v", len(fc.versions), len(want), fc.versions)
	}
	for k, v := range want {
		if got := fc.versions[k.Int16()]; got != v {
			t.Errorf("%s: claimed %v, want %v", k.Name(), got, v)
		}
	}

	header := regexp.MustCompile(`^// \w+: v(\d+)(?:-(\d+))?\.`)
	literal := regexp.MustCompile(`kernel\.Claim\{Key: kmsg\.\w+, Min: (\d+), Max: (\d+),`)
	files, err := filepath.Glob("[0-9][0-9]_*.go")
	if err != nil || len(files) != len(want) {
		t.Fatalf("%d key files, want %d: %v", len(files), len(want), err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		h, l := header.FindSubmatch(b), literal.FindSubmatch(b)
		if h == nil || l == nil {
			t.Errorf("%s: no header range or no claim literal", f)
			continue
		}
		hmax := h[2]
		if hmax == nil {
			hmax = h[1]
		}
		n, _ := strconv.Atoi(f[:2])
		if string(h[1]) != string(l[1]) || string(hmax) != string(l[2]) {
			t.Errorf("%s: header v%s-%s, claim %s-%s", f, h[1], hmax, l[1], l[2])
		}
		lo, _ := strconv.Atoi(string(l[1]))
		hi, _ := strconv.Atoi(string(l[2]))
		if got := fc.versions[int16(n)]; got != [2]int16{int16(lo), int16(hi)} {
			t.Errorf("%s: key %d claimed %v, literal %d-%d", f, n, got, lo, hi)
		}
	}
}
