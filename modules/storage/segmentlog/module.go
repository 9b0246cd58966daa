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
	// Dir is the log directory (log.dirs, one directory). Default: the broker's data_dir.
	Dir string `yaml:"dir"`
	// RetentionCheckIntervalMs is how often retention runs (log.retention.check.interval.ms).
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

	store   *Store
	logger  *slog.Logger
	cleaner *compact.Cleaner // nil when log.cleaner.enable is false
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New returns a Module with defaults.
func New() *Module {
	return &Module{RetentionCheckIntervalMs: 300000, FlushCheckIntervalMs: 1000}
}

// Provision opens the log directory and claims DescribeLogDirs.
func (m *Module) Provision(ctx kernel.Context) error {
	m.logger = ctx.Logger()
	if m.Dir == "" {
		m.Dir = ctx.Broker().DataDir
	}
	if m.Dir == "" {
		return errors.New("storage.segmentlog: no dir and no broker data_dir")
	}
	abs, err := filepath.Abs(m.Dir)
	if err != nil {
		return fmt.Errorf("storage.segmentlog: %w", err)
	}
	m.Dir = abs
	b := kconfig.ResolveBroker(kconfig.MergeBroker(ctx.Broker().StaticConfigs, nil, nil))
	if m.HighWatermarkCheckpointIntervalMs == 0 {
		m.HighWatermarkCheckpointIntervalMs = b.ReplicaHighWatermarkCheckpointIntervalMs
	}
	if m.RecoveryCheckpointIntervalMs == 0 {
		m.RecoveryCheckpointIntervalMs = b.LogFlushOffsetCheckpointIntervalMs
	}
	if err := m.Validate(); err != nil {
		return err
	}
	if m.store, err = OpenStore(m.Dir, m.logger); err != nil {
		return fmt.Errorf("storage.segmentlog: %w", err)
	}
	m.store.SetOpenFilesBudget(int(b.SluiceLogOpenFilesMax))
	m.logger.Info("segment file handle budget", "open_files_max", m.store.files.budget)
	if err := kernel.ClaimAll(ctx, describeLogDirsClaim(m)); err != nil {
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
	logs := m.store.openLogs()
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
	if m.RetentionCheckIntervalMs <= 0 {
		return fmt.Errorf("storage.segmentlog: retention_check_interval_ms must be > 0, got %d", m.RetentionCheckIntervalMs)
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
	if m.store == nil || m.HighWatermarkCheckpointIntervalMs <= 0 {
		return errors.New("storage.segmentlog: not provisioned")
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(3)
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
	for _, l := range m.store.openLogs() {
		if err := l.EnforceRetention(now); err != nil && !errors.Is(err, kernel.ErrLogClosed) {
			m.logger.Warn("retention failed", "topic", l.tp.Topic, "partition", l.tp.Partition, "err", err)
		}
	}
}

func (m *Module) flushPass(now time.Time) {
	for _, l := range m.store.openLogs() {
		if err := l.maybeFlush(now.UnixMilli()); err != nil && !errors.Is(err, kernel.ErrLogClosed) {
			m.logger.Warn("flush failed", "topic", l.tp.Topic, "partition", l.tp.Partition, "err", err)
		}
	}
	if m.store.checkpointsDue(now, time.Duration(m.RecoveryCheckpointIntervalMs)*time.Millisecond) {
		if err := m.store.writeCheckpoints(); err != nil {
			m.logger.Warn("checkpoint failed", "err", err)
		}
	}
}

func (m *Module) hwPass(time.Time) {
	if err := m.store.writeHWCheckpoint(); err != nil {
		m.logger.Warn("high watermark checkpoint failed", "err", err)
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
	if m.store == nil {
		return nil
	}
	return m.store.Close()
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
	if m.store == nil {
		return nil
	}
	return m.store.Close()
}

// Open implements kernel.Storage.
func (m *Module) Open(tp kernel.TopicPartition, topicID [16]byte, cfg kernel.LogConfig) (kernel.Log, error) {
	return m.store.Open(tp, topicID, cfg)
}

// Remove implements kernel.Storage.
func (m *Module) Remove(tp kernel.TopicPartition) error { return m.store.Remove(tp) }

// Dirs implements kernel.Storage.
func (m *Module) Dirs() []kernel.LogDir { return m.store.Dirs() }

// RemoveStrays implements kernel.StrayRemover.
func (m *Module) RemoveStrays(clusterID string, nodeID int32, keep func(kernel.TopicPartition, [16]byte) bool) (kernel.StrayResult, error) {
	return m.store.RemoveStrays(clusterID, nodeID, keep)
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
