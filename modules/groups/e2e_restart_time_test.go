package groups_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// The CI form of TestCoordinatorRestartTime is tiny; the figure of docs/BENCHMARKS.md
// ("restart time of the groups coordinator after 1M commits") is
//
//	go test ./modules/groups -run TestCoordinatorRestartTime -v -timeout 30m \
//	  -args -restart.commits 1000000 -restart.groups 20 -restart.partitions 500
var (
	restartCommits    = flag.Int("restart.commits", 20000, "offsets TestCoordinatorRestartTime commits before the restart")
	restartGroups     = flag.Int("restart.groups", 4, "groups TestCoordinatorRestartTime commits for")
	restartPartitions = flag.Int("restart.partitions", 50, "partitions of the topic each group commits for (all of them in each OffsetCommit)")
)

// TestCoordinatorRestartTime commits -restart.commits offsets (every group commits all
// -restart.partitions partitions in each OffsetCommit, four clients at once), restarts
// the broker and times until FetchOffsets of every group answers its last commits:
// once with the log cleaner compacting __consumer_offsets (waiting until it has caught
// up before the restart) and once without it. Each restarts twice: with the groups
// offset store (the coordinator replays only what the store had not applied, so the
// log's size hardly matters) and without it (the whole log is replayed). It logs the
// time to commit, the __consumer_offsets size before the restarts, the time until the
// broker is ready and the time until every group's offsets are loaded; the broker's
// log (at info) says how many records each __consumer_offsets partition replayed and
// how long it took ("coordinating __consumer_offsets partition").
func TestCoordinatorRestartTime(t *testing.T) {
	for _, cleaner := range []bool{true, false} {
		t.Run(fmt.Sprintf("cleaner=%v", cleaner), func(t *testing.T) { restartTime(t, cleaner) })
	}
}

func restartTime(t *testing.T, cleaner bool) {
	groups, parts := *restartGroups, int32(*restartPartitions)
	rounds := *restartCommits / (groups * int(parts))
	if rounds < 1 {
		t.Fatalf("-restart.commits %d is fewer than groups x partitions (%d)", *restartCommits, groups*int(parts))
	}
	// At info, the broker logs how long each __consumer_offsets partition took to
	// replay ("coordinating __consumer_offsets partition ... took").
	b := testbroker.Start(t, testbroker.WithLogLevel(slog.LevelInfo), testbroker.WithConfig(fmt.Sprintf(`
configs:
  offsets.topic.num.partitions: "4"
  offsets.topic.segment.bytes: "1048576"
  log.cleaner.enable: "%v"
  log.cleaner.backoff.ms: "50"
`, cleaner)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	adm := b.Admin(t)
	createTopic(t, adm, "events", parts)

	// offsetAt is what group g commits for partition p in round r.
	offsetAt := func(g, r int, p int32) int64 { return int64(r)*100000 + int64(g)*1000 + int64(p) }
	const workers = 4
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		cl := b.Admin(t)
		wg.Go(func() {
			for r := range rounds {
				for g := w; g < groups; g += workers {
					os := kadm.Offsets{}
					for p := range parts {
						os.Add(kadm.Offset{Topic: "events", Partition: p, At: offsetAt(g, r, p), LeaderEpoch: -1})
					}
					res, err := cl.CommitOffsets(ctx, fmt.Sprintf("g%d", g), os)
					if err == nil {
						err = res.Error()
					}
					if err != nil {
						errs <- fmt.Errorf("g%d round %d: %w", g, r, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	committed := rounds * groups * int(parts)
	commitTook := time.Since(start)

	if cleaner {
		// Caught up: no __consumer_offsets partition has more dirty bytes than clean
		// ones (min.cleanable.dirty.ratio 0.5), twice in a row.
		calm := 0
		waitFor(t, 10*time.Minute, "the cleaner to catch up on __consumer_offsets", func() string {
			ratios, err := dirtyRatios(ctx, b.AdminAddr, "__consumer_offsets")
			if err != nil {
				return err.Error()
			}
			for p, r := range ratios {
				if r >= 0.5 {
					calm = 0
					return fmt.Sprintf("partition %s dirty ratio %.2f", p, r)
				}
			}
			if calm++; calm < 2 {
				return "once"
			}
			return ""
		})
	}
	size := offsetsTopicBytes(t, ctx, adm)

	// restart stops the broker (then, with removeStore, deletes the groups offset store,
	// so that the coordinator replays __consumer_offsets from its start, as Kafka's
	// always does), starts it and times until every group's last commits are fetched.
	restart := func(removeStore bool) (ready, loaded time.Duration) {
		b.Stop()
		if removeStore {
			if err := os.RemoveAll(filepath.Join(b.DataDir, "groups", "offsets")); err != nil {
				t.Fatal(err)
			}
		}
		stopped := time.Now()
		b.Restart(t) // b is stopped: this only starts it
		ready = time.Since(stopped)
		// Retried every 5 ms (kgo's default backoff is far longer), so the time says
		// when the coordinator answered, not when the client looked again.
		adm := kadm.NewClient(b.Client(t, kgo.RetryBackoffFn(func(int) time.Duration { return 5 * time.Millisecond })))
		defer adm.Close()
		last := rounds - 1
		for g := range groups {
			group := fmt.Sprintf("g%d", g)
			for {
				got, err := adm.FetchOffsets(ctx, group)
				if err == nil {
					err = got.Error()
				}
				if err == nil {
					for p := range parts {
						r, ok := got.Lookup("events", p)
						if !ok || r.At != offsetAt(g, last, p) {
							t.Fatalf("%s events-%d: offset %d after the restart, want %d", group, p, r.At, offsetAt(g, last, p))
						}
					}
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("fetch offsets of %s: %v", group, err)
				}
				time.Sleep(5 * time.Millisecond) // the coordinator is loading
			}
		}
		return ready, time.Since(stopped)
	}
	ready, loaded := restart(false)
	readyFull, loadedFull := restart(true)
	t.Logf("cleaner=%v: %d offsets committed (%d groups x %d partitions x %d rounds) in %v (%.0f/s); __consumer_offsets %d bytes (%.1f MiB) before the restart",
		cleaner, committed, groups, parts, rounds, commitTook.Round(time.Millisecond), float64(committed)/commitTook.Seconds(),
		size, float64(size)/(1<<20))
	t.Logf("cleaner=%v: restart with the offset store: broker ready %v after start, every group's offsets fetched %v after start",
		cleaner, ready.Round(time.Millisecond), loaded.Round(time.Millisecond))
	t.Logf("cleaner=%v: restart without the offset store (full replay): broker ready %v after start, every group's offsets fetched %v after start",
		cleaner, readyFull.Round(time.Millisecond), loadedFull.Round(time.Millisecond))
}

// dirtyRatios reads sluice_log_cleaner_dirty_ratio of topic's partitions from the
// broker's /metrics at admin (host:port), by partition.
func dirtyRatios(ctx context.Context, admin, topic string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	// Labels come sorted by name: {partition="N",topic="T"}.
	const prefix = `sluice_log_cleaner_dirty_ratio{partition="`
	suffix := fmt.Sprintf(`",topic=%q} `, topic)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		part, value, ok := strings.Cut(line, suffix)
		if !ok {
			continue // another topic
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", sc.Text(), err)
		}
		out[part] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s partitions in /metrics", topic)
	}
	return out, nil
}
