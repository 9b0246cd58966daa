package offsets

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustFetch(t *testing.T, s *Store, g, topic string, p int32) (Committed, bool) {
	t.Helper()
	c, ok, err := s.Fetch(g, topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return c, ok
}

func mustGroup(t *testing.T, s *Store, g string) map[TopicPartition]Committed {
	t.Helper()
	m, err := s.FetchGroup(g)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustGroups(t *testing.T, s *Store) []string {
	t.Helper()
	gs, err := s.Groups()
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

func TestStoreCRUD(t *testing.T) {
	s := openStore(t, t.TempDir())
	c1 := Committed{Offset: 10, LeaderEpoch: 1, Metadata: "a", CommitTimestamp: 100}
	c2 := Committed{Offset: 20, LeaderEpoch: -1, CommitTimestamp: 200, ExpireTimestamp: 300}

	if _, ok := mustFetch(t, s, "g", "t", 0); ok {
		t.Fatal("fetch on an empty store found an offset")
	}
	steps := []struct {
		name string
		do   func() error
		want map[string]map[TopicPartition]Committed
	}{
		{"commit", func() error { return s.Commit("g", "t", 0, c1) },
			map[string]map[TopicPartition]Committed{"g": {{"t", 0}: c1}}},
		{"overwrite", func() error { return s.Commit("g", "t", 0, c2) },
			map[string]map[TopicPartition]Committed{"g": {{"t", 0}: c2}}},
		{"more partitions and groups", func() error {
			return s.CommitBatch([]Entry{
				{Group: "g", Topic: "t", Partition: 1, Committed: c1},
				{Group: "g", Topic: "u", Partition: 0, Committed: c1},
				// Prefix neighbours of "g": must not leak into its scans.
				{Group: "g2", Topic: "t", Partition: 0, Committed: c1},
				{Group: "", Topic: "t", Partition: 0, Committed: c2},
			})
		}, map[string]map[TopicPartition]Committed{
			"g":  {{"t", 0}: c2, {"t", 1}: c1, {"u", 0}: c1},
			"g2": {{"t", 0}: c1},
			"":   {{"t", 0}: c2},
		}},
		{"delete offsets", func() error {
			return s.DeleteOffsets("g", []TopicPartition{{"t", 1}, {"missing", 9}})
		}, map[string]map[TopicPartition]Committed{
			"g":  {{"t", 0}: c2, {"u", 0}: c1},
			"g2": {{"t", 0}: c1},
			"":   {{"t", 0}: c2},
		}},
		{"delete group", func() error { return s.DeleteGroup("g") },
			map[string]map[TopicPartition]Committed{"g2": {{"t", 0}: c1}, "": {{"t", 0}: c2}}},
		{"delete missing group", func() error { return s.DeleteGroup("nope") },
			map[string]map[TopicPartition]Committed{"g2": {{"t", 0}: c1}, "": {{"t", 0}: c2}}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := st.do(); err != nil {
				t.Fatal(err)
			}
			checkState(t, s, st.want)
		})
	}
}

// checkState compares all groups, each group's offsets, and single fetches.
func checkState(t *testing.T, s *Store, want map[string]map[TopicPartition]Committed) {
	t.Helper()
	var wantGroups []string
	for g := range want {
		wantGroups = append(wantGroups, g)
	}
	got := mustGroups(t, s)
	if len(got) != len(wantGroups) {
		t.Fatalf("groups %q, want %q", got, wantGroups)
	}
	for g, offs := range want {
		if m := mustGroup(t, s, g); !reflect.DeepEqual(m, offs) {
			t.Fatalf("group %q: %v, want %v", g, m, offs)
		}
		for tp, c := range offs {
			if got, ok := mustFetch(t, s, g, tp.Topic, tp.Partition); !ok || got != c {
				t.Fatalf("fetch %q %v: %+v %v, want %+v", g, tp, got, ok, c)
			}
		}
	}
}

func TestGroupsSortedAndMetadata(t *testing.T) {
	s := openStore(t, t.TempDir())
	for _, g := range []string{"zz", "a", "bbb", "a\xff", "\xff\xff"} {
		for p := int32(0); p < 3; p++ {
			if err := s.Commit(g, "t", p, Committed{Offset: int64(p)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.PutGroupMetadata("only-meta", sampleGroup()); err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "a\xff", "bbb", "only-meta", "zz", "\xff\xff"}
	if got := mustGroups(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("groups %q, want %q", got, want)
	}
	g, ok, err := s.GroupMetadata("only-meta")
	if err != nil || !ok || !reflect.DeepEqual(g, sampleGroup()) {
		t.Fatalf("metadata %+v %v %v", g, ok, err)
	}
	if err := s.DeleteGroup("only-meta"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.GroupMetadata("only-meta"); ok {
		t.Fatal("metadata survived DeleteGroup")
	}
}

func TestCommitBatchAtomic(t *testing.T) {
	s := openStore(t, t.TempDir())
	if err := s.Commit("g", "t", 0, Committed{Offset: 1}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		entries []Entry
		wantErr error
	}{
		{"string too long", []Entry{
			{Group: "g", Topic: "t", Partition: 0, Committed: Committed{Offset: 2}},
			{Group: "g", Topic: "t", Partition: 1, Committed: Committed{Metadata: strings.Repeat("m", 1<<15)}},
		}, ErrTooLong},
		{"too big for one transaction", bigBatch(), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.CommitBatch(tc.entries)
			if err == nil {
				t.Fatal("batch succeeded")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			want := map[TopicPartition]Committed{{"t", 0}: {Offset: 1}}
			if got := mustGroup(t, s, "g"); !reflect.DeepEqual(got, want) {
				t.Fatalf("after failed batch: %d offsets, want %v", len(got), want)
			}
		})
	}
	t.Run("success", func(t *testing.T) {
		var es []Entry
		want := map[TopicPartition]Committed{}
		for p := int32(0); p < 50; p++ {
			c := Committed{Offset: int64(p) + 100}
			es = append(es, Entry{Group: "g", Topic: "t", Partition: p, Committed: c})
			want[TopicPartition{"t", p}] = c
		}
		if err := s.CommitBatch(es); err != nil {
			t.Fatal(err)
		}
		if got := mustGroup(t, s, "g"); !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v", got)
		}
	})
}

// bigBatch is larger than badger's transaction limit for our memtable size;
// its first entry would change ("g","t",0) if any of it were applied.
func bigBatch() []Entry {
	es := []Entry{{Group: "g", Topic: "t", Partition: 0, Committed: Committed{Offset: 999}}}
	meta := strings.Repeat("x", 500) // below the value threshold: counts in full
	for p := int32(1); p < 5000; p++ {
		es = append(es, Entry{Group: "g", Topic: "big", Partition: p, Committed: Committed{Metadata: meta}})
	}
	return es
}

func TestReopenPersistence(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	want := fillStore(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, _, err := s.Fetch("g0", "t", 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("fetch after close: %v", err)
	}
	s2 := openStore(t, dir)
	checkState(t, s2, want)
	if got := s2.AppliedOffset(4); got != 41 {
		t.Fatalf("applied offset %d, want 41", got)
	}
}

// TestCrashPersistence copies the directory of a store that was never closed
// (as a crash leaves it) and opens the copy: SyncWrites made every commit
// durable, so nothing is lost and badger needs no Close to recover.
func TestCrashPersistence(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	want := fillStore(t, s)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	s2 := openStore(t, crashed)
	checkState(t, s2, want)
	if got := s2.AppliedOffset(4); got != 41 {
		t.Fatalf("applied offset %d, want 41", got)
	}
}

func fillStore(t *testing.T, s *Store) map[string]map[TopicPartition]Committed {
	t.Helper()
	want := map[string]map[TopicPartition]Committed{}
	for g := 0; g < 5; g++ {
		group := fmt.Sprintf("g%d", g)
		want[group] = map[TopicPartition]Committed{}
		for p := int32(0); p < 10; p++ {
			c := Committed{Offset: int64(g*100) + int64(p), LeaderEpoch: p, Metadata: group, CommitTimestamp: 5}
			if err := s.Commit(group, "t", p, c); err != nil {
				t.Fatal(err)
			}
			want[group][TopicPartition{"t", p}] = c
		}
	}
	c := Committed{Offset: 7, LeaderEpoch: 3, CommitTimestamp: 9}
	if err := s.Apply(4, EncodeOffsetKey("applied", "t", 0), EncodeOffsetValue(c), 41); err != nil {
		t.Fatal(err)
	}
	want["applied"] = map[TopicPartition]Committed{{"t", 0}: c}
	return want
}

// copyDir copies regular files, leaving out badger's LOCK (held by the live store).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		src, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(to, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		src.Close()
		if err := dst.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

type record struct {
	key, value []byte
	offset     int64
}

func TestApplyReplay(t *testing.T) {
	cA := Committed{Offset: 5, LeaderEpoch: 2, Metadata: "m", CommitTimestamp: 10}
	cB := Committed{Offset: 6, LeaderEpoch: -1, CommitTimestamp: 11, ExpireTimestamp: 99}
	cA2 := Committed{Offset: 8, LeaderEpoch: 3, CommitTimestamp: 12}
	gm := sampleGroup()
	log := []record{
		{EncodeOffsetKey("g", "t", 0), EncodeOffsetValue(cA), 0},
		{EncodeOffsetKey("g", "t", 1), EncodeOffsetValue(cB), 1},
		{EncodeGroupKey("g"), EncodeGroupMetadataValue(gm), 2},
		{(&hand{}).i16(4).str("g").b, []byte("kip-848 record"), 3}, // unread key version (type 4): skipped
		{EncodeOffsetKey("g", "t", 0), EncodeOffsetValue(cA2), 4},
		{EncodeOffsetKey("g", "t", 1), nil, 5}, // tombstone
		{EncodeOffsetKey("h", "t", 0), EncodeOffsetValue(cA), 6},
		{EncodeGroupKey("h"), EncodeGroupMetadataValue(gm), 7},
		{EncodeGroupKey("h"), nil, 8}, // group tombstone: metadata only
	}
	want := map[string]map[TopicPartition]Committed{
		"g": {{"t", 0}: cA2},
		"h": {{"t", 0}: cA},
	}
	tests := []struct {
		name   string
		passes [][]record
	}{
		{"once", [][]record{log}},
		{"twice", [][]record{log, log}},
		{"prefix then all", [][]record{log[:4], log}},
		{"all then stale prefix", [][]record{log, log[:2]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, t.TempDir())
			for _, pass := range tc.passes {
				for _, r := range pass {
					if err := s.Apply(7, r.key, r.value, r.offset); err != nil {
						t.Fatalf("apply %d: %v", r.offset, err)
					}
				}
			}
			checkState(t, s, want)
			if got, ok, err := s.GroupMetadata("g"); err != nil || !ok || !reflect.DeepEqual(got, gm) {
				t.Fatalf("metadata g: %+v %v %v", got, ok, err)
			}
			if _, ok, _ := s.GroupMetadata("h"); ok {
				t.Fatal("metadata h survived its tombstone")
			}
			if got := s.AppliedOffset(7); got != 8 {
				t.Fatalf("applied %d, want 8", got)
			}
			if got := s.AppliedOffset(8); got != -1 {
				t.Fatalf("untouched partition applied %d, want -1", got)
			}
		})
	}
}

func TestApplyRejectsCorrupt(t *testing.T) {
	s := openStore(t, t.TempDir())
	tests := []struct {
		name       string
		key, value []byte
	}{
		{"short key", []byte{0}, nil},
		{"corrupt offset value", EncodeOffsetKey("g", "t", 0), []byte{0, 3, 1}},
		{"corrupt group value", EncodeGroupKey("g"), []byte{0, 3}},
		{"unread offset value version", EncodeOffsetKey("g", "t", 0), (&hand{}).i16(5).b},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Apply(0, tc.key, tc.value, int64(i)); err == nil {
				t.Fatal("applied corrupt record")
			}
			if got := s.AppliedOffset(0); got != -1 {
				t.Fatalf("applied offset moved to %d", got)
			}
		})
	}
}

func TestExpireOffsets(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	ret := time.Hour
	old := now.Add(-2 * time.Hour).UnixMilli()
	recent := now.Add(-time.Minute).UnixMilli()
	tests := []struct {
		name    string
		meta    *GroupMetadata
		offsets map[TopicPartition]Committed
		empty   bool
		left    []TopicPartition
	}{
		{"empty group, old and recent commits", nil, map[TopicPartition]Committed{
			{"t", 0}: {Offset: 1, CommitTimestamp: old},
			{"t", 1}: {Offset: 1, CommitTimestamp: recent},
		}, true, []TopicPartition{{"t", 1}}},
		{"group with members keeps old commits", nil, map[TopicPartition]Committed{
			{"t", 0}: {Offset: 1, CommitTimestamp: old},
		}, false, []TopicPartition{{"t", 0}}},
		{"explicit expire timestamp wins", nil, map[TopicPartition]Committed{
			{"t", 0}: {Offset: 1, CommitTimestamp: recent, ExpireTimestamp: now.UnixMilli()},
			{"t", 1}: {Offset: 1, CommitTimestamp: old, ExpireTimestamp: now.UnixMilli() + 1},
		}, true, []TopicPartition{{"t", 1}}},
		{"consumer group counts from when it became empty", &GroupMetadata{ProtocolType: "consumer", CurrentStateTimestamp: recent},
			map[TopicPartition]Committed{{"t", 0}: {Offset: 1, CommitTimestamp: old}}, true, []TopicPartition{{"t", 0}}},
		{"consumer group empty long ago", &GroupMetadata{ProtocolType: "consumer", CurrentStateTimestamp: old},
			map[TopicPartition]Committed{{"t", 0}: {Offset: 1, CommitTimestamp: recent}}, true, nil},
		{"exactly at retention expires", nil, map[TopicPartition]Committed{
			{"t", 0}: {Offset: 1, CommitTimestamp: now.Add(-ret).UnixMilli()},
		}, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, t.TempDir())
			if tc.meta != nil {
				if err := s.PutGroupMetadata("g", *tc.meta); err != nil {
					t.Fatal(err)
				}
			}
			for tp, c := range tc.offsets {
				if err := s.Commit("g", tp.Topic, tp.Partition, c); err != nil {
					t.Fatal(err)
				}
			}
			// A second, busy group is never touched.
			if err := s.Commit("busy", "t", 0, Committed{CommitTimestamp: old}); err != nil {
				t.Fatal(err)
			}
			n, err := s.ExpireOffsets(now, ret, func(g string) bool { return g == "g" && tc.empty })
			if err != nil {
				t.Fatal(err)
			}
			got := mustGroup(t, s, "g")
			if n != len(tc.offsets)-len(tc.left) || len(got) != len(tc.left) {
				t.Fatalf("expired %d, left %v, want left %v", n, got, tc.left)
			}
			for _, tp := range tc.left {
				if _, ok := got[tp]; !ok {
					t.Fatalf("%v expired, want it kept; left %v", tp, got)
				}
			}
			if _, ok := mustFetch(t, s, "busy", "t", 0); !ok {
				t.Fatal("busy group's offset expired")
			}
		})
	}
}

// TestHammer commits from P goroutines at once, each to its own partitions and
// all to one shared key, while readers scan; run with -race.
func TestHammer(t *testing.T) {
	const P, N = 8, 60
	s := openStore(t, t.TempDir())
	var wg sync.WaitGroup
	errs := make(chan error, 2*P)
	for w := 0; w < P; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < N; i++ {
				c := Committed{Offset: int64(i), LeaderEpoch: int32(w)}
				var err error
				if i%2 == 0 {
					err = s.Commit("g", "t", int32(w), c)
				} else {
					err = s.CommitBatch([]Entry{
						{Group: "g", Topic: "t", Partition: int32(w), Committed: c},
						{Group: "g", Topic: "shared", Partition: 0, Committed: c},
					})
				}
				if err == nil && i%10 == 0 {
					err = s.Apply(int32(w), EncodeOffsetKey("applied", "t", int32(w)), EncodeOffsetValue(c), int64(i))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < N/4; i++ {
				m, err := s.FetchGroup("g")
				if err == nil {
					_, err = s.Groups()
				}
				if err != nil {
					errs <- err
					return
				}
				for tp, c := range m {
					if tp.Topic == "t" && c.LeaderEpoch != tp.Partition {
						errs <- fmt.Errorf("%v has epoch %d: torn write", tp, c.LeaderEpoch)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	m := mustGroup(t, s, "g")
	for w := int32(0); w < P; w++ {
		if c := m[TopicPartition{"t", w}]; c.Offset != N-1 || c.LeaderEpoch != w {
			t.Fatalf("partition %d: %+v, want offset %d", w, c, N-1)
		}
		if got := s.AppliedOffset(w); got != N-10 {
			t.Fatalf("applied %d: %d, want %d", w, got, N-10)
		}
	}
	if c := m[TopicPartition{"shared", 0}]; c.Offset != N-1 {
		t.Fatalf("shared: %+v, want offset %d (every writer's last)", c, N-1)
	}
}

func TestCloseWhileBusy(t *testing.T) {
	s, err := Open(t.TempDir(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if err := s.Commit("g", "t", int32(w), Committed{Offset: int64(i)}); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("commit: %v", err)
					}
					return
				}
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, ok, _ := s.Fetch("g", "t", 0); ok && c.Offset > 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no commits within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

func TestOpenRefusesOtherLayout(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.update(func(txn *badger.Txn) error { return txn.Set(layoutKey, []byte{0, 0, 0, 9}) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(dir, nil); !errors.Is(err, ErrLayout) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("open: %v, want ErrLayout", err)
	}
}

// TestExpireRacesCommits: a fresh commit that lands while expiry runs is never
// deleted (expiry judges and deletes with writes held off).
func TestExpireRacesCommits(t *testing.T) {
	s := openStore(t, t.TempDir())
	now := time.UnixMilli(10_000_000)
	stale := Committed{Offset: 1, CommitTimestamp: now.Add(-2 * time.Hour).UnixMilli()}
	fresh := Committed{Offset: 2, CommitTimestamp: now.UnixMilli()}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := s.ExpireOffsets(now, time.Hour, func(string) bool { return true }); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 100; i++ {
		p := int32(i % 4)
		if err := s.Commit("g", "t", p, stale); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit("g", "t", p, fresh); err != nil {
			t.Fatal(err)
		}
		if c, ok := mustFetch(t, s, "g", "t", p); !ok || c != fresh {
			t.Fatalf("round %d: fresh commit gone: %+v %v", i, c, ok)
		}
	}
	close(done)
	wg.Wait()
}

// TestDeleteGroupLarge deletes a group whose keys overflow one transaction
// (more partitions than one chunk, and long keys).
func TestDeleteGroupLarge(t *testing.T) {
	s := openStore(t, t.TempDir())
	group := strings.Repeat("g", 4096) // 1000 such keys overflow a transaction
	const parts = 1100
	for start := 0; start < parts; start += 20 {
		var es []Entry
		for p := start; p < start+20; p++ {
			es = append(es, Entry{Group: group, Topic: "t", Partition: int32(p), Committed: Committed{Offset: 1}})
		}
		if err := s.CommitBatch(es); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit("other", "t", 0, Committed{Offset: 1}); err != nil {
		t.Fatal(err)
	}
	if got := len(mustGroup(t, s, group)); got != parts {
		t.Fatalf("%d offsets before delete, want %d", got, parts)
	}
	if err := s.DeleteGroup(group); err != nil {
		t.Fatal(err)
	}
	if got := mustGroups(t, s); !reflect.DeepEqual(got, []string{"other"}) {
		t.Fatalf("groups after delete: %d, first %.10q", len(got), got)
	}
}

func TestApplyBatch(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := EncodeOffsetValue(Committed{Offset: 7, LeaderEpoch: NoLeaderEpoch})
	recs := []Record{
		{Key: EncodeOffsetKey("g", "t", 0), Value: v, Offset: 10},
		{Key: EncodeOffsetKey("g", "t", 1), Value: v, Offset: 11},
		{Key: EncodeOffsetKey("g", "t", 0), Value: nil, Offset: 12},
	}
	if err := s.ApplyBatch(3, recs); err != nil {
		t.Fatal(err)
	}
	if got := s.AppliedOffset(3); got != 12 {
		t.Fatalf("applied = %d, want 12", got)
	}
	if _, ok, _ := s.Fetch("g", "t", 0); ok {
		t.Fatal("t/0 should be deleted by the tombstone at 12")
	}
	if c, ok, _ := s.Fetch("g", "t", 1); !ok || c.Offset != 7 {
		t.Fatalf("t/1 = %+v %v", c, ok)
	}
	// A replayed prefix is skipped; records past it apply.
	if err := s.ApplyBatch(3, []Record{
		{Key: EncodeOffsetKey("g", "t", 0), Value: v, Offset: 12},
		{Key: EncodeOffsetKey("g", "t", 2), Value: v, Offset: 13},
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Fetch("g", "t", 0); ok {
		t.Fatal("record at 12 was applied twice")
	}
	if _, ok, _ := s.Fetch("g", "t", 2); !ok {
		t.Fatal("record at 13 missing")
	}
	if err := s.ApplyBatch(3, []Record{{Key: []byte{0}, Offset: 14}}); err == nil {
		t.Fatal("corrupt key applied")
	}
	if err := s.ApplyBatch(3, []Record{{Key: recs[0].Key, Value: v, Offset: 20}, {Key: recs[0].Key, Value: v, Offset: 19}}); err == nil {
		t.Fatal("descending offsets applied")
	}
	if got := s.AppliedOffset(3); got != 13 {
		t.Fatalf("applied = %d after failures, want 13", got)
	}
}
