package segmentlog

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// dirNames lists the directory names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// RemoveStrays keeps open partitions without asking, asks about the others with the
// id their directory records, leaves directories that are not partitions alone, and
// deletes only once meta.properties shows the data dir was this cluster's and node's
// before: on first use, and for another cluster's data, strays are moved aside.
func TestRemoveStrays(t *testing.T) {
	dir := t.TempDir()
	cfg := storagetest.DefaultConfig()
	tp := func(topic string, p int32) kernel.TopicPartition {
		return kernel.TopicPartition{Topic: topic, Partition: p}
	}
	idA, idB, idOld := [16]byte{0xa}, [16]byte{0xb}, [16]byte{0xc}
	// Left by an earlier run: a-0 (kept), b-0 and b-1 (topic deleted), c-0 (an older
	// incarnation's id).
	s := openTestStore(t, dir)
	for _, o := range []struct {
		tp kernel.TopicPartition
		id [16]byte
	}{{tp("a", 0), idA}, {tp("b", 0), idB}, {tp("b", 1), idB}, {tp("c", 0), idOld}} {
		l, err := s.Open(o.tp, o.id, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendLeader(storagetest.Batch(0, 1, 2, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "notes-1"), 0o755); err != nil { // not a partition
		t.Fatal(err)
	}

	keepFn := func(asked *[]string) func(kernel.TopicPartition, [16]byte) bool {
		return func(p kernel.TopicPartition, id [16]byte) bool {
			*asked = append(*asked, p.String())
			return p.Topic == "a" && id == idA || p.Topic == "open" || p.Topic == "c" && id == [16]byte{0xd}
		}
	}

	// First use: nothing recorded, so strays are moved aside and the file written.
	s = openTestStore(t, dir)
	if _, err := s.Open(tp("open", 0), [16]byte{0xe}, cfg); err != nil {
		t.Fatal(err)
	}
	var asked []string
	res, err := s.RemoveStrays("cluster-1", 1, keepFn(&asked))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(asked)
	if want := []string{"a-0", "b-0", "b-1", "c-0"}; !slices.Equal(asked, want) {
		t.Fatalf("asked about %v, want %v (open partitions and non-partitions never)", asked, want)
	}
	if res.Kept != 1 || res.Removed != 0 || res.MovedAside != 3 || res.Bytes <= 0 {
		t.Fatalf("first use: %+v, want 1 kept, 3 moved aside, their bytes", res)
	}
	names := dirNames(t, dir)
	strays := 0
	for _, n := range names {
		if strings.HasSuffix(n, straySuffix) {
			strays++
		}
	}
	for _, want := range []string{"a-0", "notes-1", "open-0"} {
		if !slices.Contains(names, want) {
			t.Fatalf("dirs %v lack %s", names, want)
		}
	}
	if strays != 3 || slices.Contains(names, "b-0") || slices.Contains(names, "c-0") {
		t.Fatalf("dirs after first use: %v, want b-0, b-1, c-0 moved aside", names)
	}
	if mp, ok, err := readMetaProperties(dir); err != nil || !ok || mp != (metaProperties{"cluster-1", 1}) {
		t.Fatalf("meta.properties: %+v %v %v", mp, ok, err)
	}

	// Recorded and matching: a stray is deleted, and its checkpoint entries go too.
	l, err := s.Open(tp("d", 0), [16]byte{0xf}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendLeader(storagetest.Batch(0, 1, 2, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, dir)
	if _, ok := s.recoveryPoints[tp("d", 0)]; !ok {
		t.Fatal("d-0 has no recovery point after a clean stop")
	}
	asked = nil
	res, err = s.RemoveStrays("cluster-1", 1, keepFn(&asked))
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 1 || res.MovedAside != 0 || res.Kept != 2 {
		t.Fatalf("matching: %+v, want d-0 removed, a-0 and open-0 kept", res)
	}
	if names := dirNames(t, dir); slices.Contains(names, "d-0") || slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, deleteDirSuffix) }) {
		t.Fatalf("dirs after the removal: %v", names)
	}
	if _, ok := s.recoveryPoints[tp("d", 0)]; ok {
		t.Fatal("d-0 keeps its recovery point entry")
	}
	// A removed partition opens again empty (a re-created topic).
	l, err = s.Open(tp("d", 0), [16]byte{0x10}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("re-created d-0 ends at %d", l.LogEndOffset())
	}

	// Another cluster: moved aside, and the file then names the new one.
	res, err = s.RemoveStrays("cluster-2", 1, func(kernel.TopicPartition, [16]byte) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 0 || res.MovedAside != 2 { // a-0 and open-0 (not open since the reopen); d-0 is open
		t.Fatalf("other cluster: %+v, want a-0 and open-0 moved aside", res)
	}
	if mp, _, _ := readMetaProperties(dir); mp.clusterID != "cluster-2" {
		t.Fatalf("meta.properties names %q after the other cluster's sweep", mp.clusterID)
	}
	if _, err := s.RemoveStrays("", 1, nil); err == nil {
		t.Fatal("no cluster id accepted")
	}
}
