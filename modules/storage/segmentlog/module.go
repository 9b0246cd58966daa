package segmentlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/kernel/diskguard"
	"github.com/sluicehq/sluice/modules/storage/internal/compact"
)

// ID is the module ID.
const ID = "storage.segmentlog"

// Info describes the module for the registry.
func Info() kernel.ModuleInfo {
	return kernel.ModuleInfo{ID: ID, New: func() kernel.Module { return New() }}
}

// Module is the segment-log storage module. Its exported fields are its config section.
type Module struct {
	// Dir is the one log directory, when set. Default: the broker config log.dirs
	// (comma-separated: several directories, JBOD), itself defaulting to data_dir.
	Dir string `yaml:"dir"`
	// RetentionCheckIntervalMs is how often retention runs. Default (0): the broker
	// config log.retention.check.interval.ms (300000).
	RetentionCheckIntervalMs int64 `yaml:"retention_check_interval_ms"`
	// FlushCheckIntervalMs is how often flush.ms deadlines and rolled-but-unflushed
	// segments are checked, and dirty checkpoints written (log.flush.scheduler.interval.ms).
	FlushCheckIntervalMs int64 `yaml:"flush_check_interval_ms"`
	// HighWatermarkCheckpointIntervalMs is how often the high watermarks are written to
	// replication-offset-checkpoint when one changed. Default (0): the broker config
	// replica.high.watermark.checkpoint.interval.ms (5000).
	HighWatermarkCheckpointIntervalMs int64 `yaml:"high_watermark_checkpoint_interval_ms"`
	// RecoveryCheckpointIntervalMs is how often recovery-point-offset-checkpoint is
	// rewritten when only recovery points moved (each flush pass rewrites it, and
	// log-start-offset-checkpoint, when a log start moved or a partition came or went).
	// Default (0): the broker config log.flush.offset.checkpoint.interval.ms (60000).
	RecoveryCheckpointIntervalMs int64 `yaml:"recovery_checkpoint_interval_ms"`

	dirs    *dirSet
	paths   []string // the log dirs, absolute
	logger  *slog.Logger
	cleaner *compact.Cleaner // nil when log.cleaner.enable is false
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New returns a Module with defaults.
func New() *Module {
	return &Module{FlushCheckIntervalMs: 1000}
}

// Provision opens the log directories and claims DescribeLogDirs.
func (m *Module) Provision(ctx kernel.Context) error {
	m.logger = ctx.Logger()
	b := kconfig.ResolveBroker(kconfig.MergeBroker(ctx.Broker().StaticConfigs, nil, nil))
	paths := b.LogDirs
	if m.Dir != "" {
		paths = []string{m.Dir}
	}
	if len(paths) == 0 && ctx.Broker().DataDir != "" {
		paths = []string{ctx.Broker().DataDir}
	}
	if len(paths) == 0 {
		return errors.New("storage.segmentlog: no dir, no log.dirs and no broker data_dir")
	}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("storage.segmentlog: %w", err)
		}
		m.paths = append(m.paths, abs)
	}
	if m.Dir != "" {
		m.Dir = m.paths[0]
	}
	if m.RetentionCheckIntervalMs == 0 {
		m.RetentionCheckIntervalMs = b.LogRetentionCheckIntervalMs
	}
	if m.HighWatermarkCheckpointIntervalMs == 0 {
		m.HighWatermarkCheckpointIntervalMs = b.ReplicaHighWatermarkCheckpointIntervalMs
	}
	if m.RecoveryCheckpointIntervalMs == 0 {
		m.RecoveryCheckpointIntervalMs = b.LogFlushOffsetCheckpointIntervalMs
	}
	if err := m.Validate(); err != nil {
		return err
	}
	var err error
	if m.dirs, err = openDirSet(m.paths, m.logger); err != nil {
		return fmt.Errorf("storage.segmentlog: %w", err)
	}
	// Each log dir is held to the free-space reserve on its own (kernel.SpaceLog), not
	// through the broker's guard, so one full disk refuses writes to its partitions
	// only; the broker's guard keeps the data dir (metadata log, offsets store).
	m.dirs.guardDirs(b.SluiceDataDirReserveBytes, m.logger)
	ctx.Metrics().Collect("sluice_log_dir_writable", "1 while a log dir's free space is at or above sluice.data.dir.reserve.bytes; 0 while produce to its partitions is refused and its follower appends are held back.",
		kernel.KindGauge, []string{"dir"}, func(emit func(float64, ...string)) {
			for _, s := range m.dirs.stores {
				if s.guard == nil {
					continue
				}
				v := 0.0
				if s.guard.State() == diskguard.Writable {
					v = 1
				}
				emit(v, s.dir)
			}
		})
	ctx.Metrics().Collect("sluice_log_dir_offline", "1 for a log dir that failed (its partitions are offline), 0 for one that serves.",
		kernel.KindGauge, []string{"dir"}, func(emit func(float64, ...string)) {
			for path, err := range m.dirs.status() {
				v := 0.0
				if err != nil {
					v = 1
				}
				emit(v, path)
			}
		})
	m.dirs.files.setBudget(int(b.SluiceLogOpenFilesMax))
	m.logger.Info("segment file handle budget", "open_files_max", m.dirs.files.budget, "log_dirs", m.paths)
	if err := kernel.ClaimAll(ctx, describeLogDirsClaim(m), alterReplicaLogDirsClaim(m)); err != nil {
		return fmt.Errorf("storage.segmentlog: %w", err)
	}
	if b.LogCleanerEnable {
		// The cleaner settings are read at start (Kafka reconfigures them live).
		m.cleaner = compact.NewCleaner(compact.Config{
			Threads:             int(b.LogCleanerThreads),
			BackoffMs:           b.LogCleanerBackoffMs,
			DedupeBufferSize:    b.LogCleanerDedupeBufferSize,
			LoadFactor:          b.LogCleanerIOBufferLoadFactor,
			IOMaxBytesPerSecond: b.LogCleanerIOMaxBytesPerSecond,
		}, m.logger, time.Now)
		compact.RegisterMetrics(ctx.Metrics(), m.cleaner, m.cleanableLogs)
	}
	return nil
}

// cleanableLogs lists the open compacted logs, for the cleaner (each says whether it
// is dirty enough) and its per-partition metrics: a log of another cleanup.policy
// would only add series of zeros.
func (m *Module) cleanableLogs() []compact.Log {
	logs := m.dirs.openLogs()
	out := make([]compact.Log, 0, len(logs))
	for _, l := range logs {
		if l.compacted() {
			out = append(out, l)
		}
	}
	return out
}

// Check runs Validate before anything is provisioned: the settings it checks need
// nothing else, so a bad value stops the broker before it touches its data dir.
func (m *Module) Check(kernel.CheckContext) error { return m.Validate() }

// Validate checks the settings.
func (m *Module) Validate() error {
	if m.RetentionCheckIntervalMs < 0 {
		return fmt.Errorf("storage.segmentlog: retention_check_interval_ms must be >= 0 (0: the broker config), got %d", m.RetentionCheckIntervalMs)
	}
	if m.FlushCheckIntervalMs <= 0 {
		return fmt.Errorf("storage.segmentlog: flush_check_interval_ms must be > 0, got %d", m.FlushCheckIntervalMs)
	}
	if m.RecoveryCheckpointIntervalMs < 0 {
		return fmt.Errorf("storage.segmentlog: recovery_checkpoint_interval_ms must be >= 0 (0: the broker config), got %d", m.RecoveryCheckpointIntervalMs)
	}
	if m.HighWatermarkCheckpointIntervalMs < 0 {
		return fmt.Errorf("storage.segmentlog: high_watermark_checkpoint_interval_ms must be >= 0 (0: the broker config), got %d", m.HighWatermarkCheckpointIntervalMs)
	}
	return nil
}

// Start starts the retention, flush and high-watermark checkpoint loops.
func (m *Module) Start(context.Context) error {
	if m.dirs == nil || m.HighWatermarkCheckpointIntervalMs <= 0 || m.RetentionCheckIntervalMs <= 0 {
		return errors.New("storage.segmentlog: not provisioned")
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(4)
	go func() {
		defer m.wg.Done()
		m.dirs.runGuards(ctx, time.Second)
	}()
	go m.loop(ctx, time.Duration(m.RetentionCheckIntervalMs)*time.Millisecond, m.retentionPass)
	go m.loop(ctx, time.Duration(m.FlushCheckIntervalMs)*time.Millisecond, m.flushPass)
	go m.loop(ctx, time.Duration(m.HighWatermarkCheckpointIntervalMs)*time.Millisecond, m.hwPass)
	if m.cleaner != nil {
		m.cleaner.Start(m.cleanableLogs)
	}
	return nil
}

func (m *Module) loop(ctx context.Context, every time.Duration, fn func(time.Time)) {
	defer m.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			fn(now)
		}
	}
}

func (m *Module) retentionPass(now time.Time) {
	for _, l := range m.dirs.openLogs() {
		if err := l.EnforceRetention(now); err != nil && !errors.Is(err, kernel.ErrLogClosed) {
			l.store.noteErr(err)
			m.logger.Warn("retention failed", "topic", l.tp.Topic, "partition", l.tp.Partition, "err", err)
		}
	}
}

// flushPass flushes what is due, checks that every log dir is still there, and
// writes the checkpoints of the dirs that are due. A dir failed by any of it is left
// out of the next passes.
func (m *Module) flushPass(now time.Time) {
	for _, s := range m.dirs.healthy() {
		s.probe()
	}
	for _, l := range m.dirs.openLogs() {
		if err := l.maybeFlush(now.UnixMilli()); err != nil && !errors.Is(err, kernel.ErrLogClosed) {
			l.store.noteErr(err)
			m.logger.Warn("flush failed", "topic", l.tp.Topic, "partition", l.tp.Partition, "err", err)
		}
	}
	for _, s := range m.dirs.healthy() {
		if s.checkpointsDue(now, time.Duration(m.RecoveryCheckpointIntervalMs)*time.Millisecond) {
			if err := s.writeCheckpoints(); err != nil {
				s.noteErr(err)
				m.logger.Warn("checkpoint failed", "dir", s.dir, "err", err)
			}
		}
	}
}

func (m *Module) hwPass(time.Time) {
	for _, s := range m.dirs.healthy() {
		if err := s.writeHWCheckpoint(); err != nil {
			s.noteErr(err)
			m.logger.Warn("high watermark checkpoint failed", "dir", s.dir, "err", err)
		}
	}
}

// Stop stops the loops, waits for them, and closes every log cleanly (checkpoints and
// the clean-shutdown marker).
func (m *Module) Stop(ctx context.Context) error {
	if m.cancel != nil {
		m.cancel()
	}
	if err := kernel.WaitGroup(ctx, &m.wg); err != nil {
		return err
	}
	if m.cleaner != nil {
		m.cleaner.Stop() // a pass in progress is abandoned: the log stays as it was
	}
	if m.dirs == nil {
		return nil
	}
	return m.dirs.Close()
}

// Cleanup closes the store if Stop did not (it is idempotent); it is safe after a
// failed Provision.
func (m *Module) Cleanup() error {
	if m.cancel != nil {
		m.cancel()
		m.wg.Wait()
	}
	if m.cleaner != nil {
		m.cleaner.Stop()
	}
	if m.dirs == nil {
		return nil
	}
	return m.dirs.Close()
}

// Open implements kernel.Storage.
func (m *Module) Open(tp kernel.TopicPartition, topicID [16]byte, cfg kernel.LogConfig) (kernel.Log, error) {
	return m.dirs.Open(tp, topicID, cfg)
}

// Remove implements kernel.Storage.
func (m *Module) Remove(tp kernel.TopicPartition) error { return m.dirs.Remove(tp) }

// Dirs implements kernel.Storage.
func (m *Module) Dirs() []kernel.LogDir { return m.dirs.Dirs() }

// RemoveStrays implements kernel.StrayRemover.
func (m *Module) RemoveStrays(clusterID string, nodeID int32, keep func(kernel.TopicPartition, [16]byte) bool) (kernel.StrayResult, error) {
	return m.dirs.RemoveStrays(clusterID, nodeID, keep)
}

var (
	_ kernel.Provisioner  = (*Module)(nil)
	_ kernel.Validator    = (*Module)(nil)
	_ kernel.Starter      = (*Module)(nil)
	_ kernel.StrayRemover = (*Module)(nil)
	_ kernel.Stopper      = (*Module)(nil)
	_ kernel.CleanerUpper = (*Module)(nil)
	_ kernel.Storage      = (*Module)(nil)
	_ kernel.Storage      = (*Store)(nil)
)
