package compact

import (
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/kernel"
)

// RegisterMetrics publishes the cleaner's figures at /metrics: totals since start,
// and per compacted partition its dirty ratio and dirty bytes now, the time of its
// last pass, and whether that pass failed (an uncleanable partition). logs lists the
// logs the cleaner serves (as Start's).
func RegisterMetrics(mt *kernel.Metrics, c *Cleaner, logs func() []Log) {
	if mt == nil || c == nil {
		return
	}
	total := func(name, help string, fn func(t Totals) int64) {
		mt.Collect(name, help, kernel.KindCounter, nil, func(emit func(float64, ...string)) { emit(float64(fn(c.Totals()))) })
	}
	total("sluice_log_cleaner_passes_total", "Cleaning passes run.", func(t Totals) int64 { return t.Passes })
	total("sluice_log_cleaner_errors_total", "Cleaning passes that failed (the partition is skipped for a while).", func(t Totals) int64 { return t.Errors })
	total("sluice_log_cleaner_bytes_read_total", "Bytes the cleaner read.", func(t Totals) int64 { return t.BytesRead })
	total("sluice_log_cleaner_bytes_written_total", "Bytes the cleaner wrote.", func(t Totals) int64 { return t.BytesWritten })
	total("sluice_log_cleaner_records_removed_total", "Records the cleaner removed (superseded, aborted, expired tombstones and markers).", func(t Totals) int64 { return t.RecordsRemoved })
	mt.Collect("sluice_log_cleaner_max_map_bytes", "Largest offset map table a pass used (bounded by log.cleaner.dedupe.buffer.size / log.cleaner.threads).", kernel.KindGauge, nil,
		func(emit func(float64, ...string)) { emit(float64(c.Totals().MaxMapBytes)) })
	mt.Collect("sluice_log_cleaner_last_pass_seconds", "Duration of the latest cleaning pass.", kernel.KindGauge, nil,
		func(emit func(float64, ...string)) { emit(float64(c.Totals().LastPassMs) / 1000) })
	perLog := func(name, help string, fn func(l Log, cand Candidate, lp lastPass, seen bool) (float64, bool)) {
		mt.Collect(name, help, kernel.KindGauge, []string{"topic", "partition"}, func(emit func(float64, ...string)) {
			nowMs := c.now().UnixMilli()
			for _, l := range logs() {
				cand, _ := l.Cleanable(nowMs)
				c.mu.Lock()
				lp, seen := c.last[l]
				c.mu.Unlock()
				if v, ok := fn(l, cand, lp, seen); ok {
					topic, part := splitName(l.Name())
					emit(v, topic, part)
				}
			}
		})
	}
	perLog("sluice_log_cleaner_dirty_ratio", "Dirty bytes over cleanable bytes of a compacted partition (min.cleanable.dirty.ratio triggers a pass).",
		func(_ Log, cand Candidate, _ lastPass, _ bool) (float64, bool) { return cand.DirtyRatio, true })
	perLog("sluice_log_cleaner_dirty_bytes", "Bytes of a compacted partition not yet cleaned (the cleaner's lag).",
		func(_ Log, cand Candidate, _ lastPass, _ bool) (float64, bool) { return float64(cand.DirtyBytes), true })
	perLog("sluice_log_cleaner_last_clean_timestamp_seconds", "When the latest pass over a partition started (Unix time).",
		func(_ Log, _ Candidate, lp lastPass, seen bool) (float64, bool) { return float64(lp.atMs) / 1000, seen })
	perLog("sluice_log_cleaner_uncleanable", "1 when the latest pass over a partition failed (see the broker log).",
		func(_ Log, _ Candidate, lp lastPass, seen bool) (float64, bool) {
			if lp.failed {
				return 1, true
			}
			return 0, seen
		})
}

// splitName splits "topic-partition" into its topic and partition.
func splitName(name string) (topic, partition string) {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i], name[i+1:]
		}
	}
	return name, ""
}
