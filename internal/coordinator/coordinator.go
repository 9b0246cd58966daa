package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/kafkahash"
	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// State is a shard's state machine: what the skeleton calls on it. Replay and
// Loaded run on the shard's loader, Appended (and Waker.Woken) on its writer (the
// same goroutine, after the load), Sweep on the sweeper, Unload on a goroutine of
// its own; see the package doc for who owns what.
type State interface {
	// ReplayFrom returns the log offset the load replays from (0: the whole log).
	ReplayFrom() int64
	// Replay applies one committed batch of the partition, in log order. An error
	// fails the load (the next lookup tries again).
	Replay(b Batch) error
	// Loaded ends a replay that reached the high watermark, before the shard serves.
	// It returns key-value pairs for the "coordinating" log line; an error fails the
	// load.
	Loaded() (logAttrs []any, err error)
	// Appended hands over a write's records (with their log offsets) once their batch
	// is committed; p is the producer of a transactional write, else nil. An error
	// means the state missed committed records: the shard is dropped and reloaded.
	Appended(recs []Record, p *Producer) error
	// Sweep runs the shard's timers; called every SweepIntervalMs while it is ready.
	Sweep(now time.Time)
	// Unload is called once, after the shard's context is cancelled: waiting
	// requests get code (NOT_COORDINATOR, or what made the shard drop).
	Unload(code *kerr.Error)
}

// Waker is an optional State: Woken runs on the writer goroutine, between writes,
// after Shard.Wake (several Wakes may be answered by one Woken).
type Waker interface{ Woken() }

// Batch is one committed batch of the log, as Replay sees it. Raw and the records'
// Key and Value are only valid during the call: copy what is kept.
type Batch struct {
	Header recordbatch.Header
	Raw    []byte
	// Records are the batch's records at or past ReplayFrom; nil for a control batch
	// (parse its marker from Raw).
	Records []Record
}

// Record is one record of the partition: replayed, or appended by the writer.
type Record struct {
	Offset     int64
	Key, Value []byte // a nil Value is a tombstone
}

// KV is one record to write.
type KV struct{ Key, Value []byte }

// Producer is the producer of a transactional write.
type Producer struct {
	ID    int64
	Epoch int16
}

// Config is what the skeleton needs from its module.
type Config struct {
	Topic   string // the internal topic
	Log     *slog.Logger
	Meta    kernel.Metadata
	Creator kernel.TopicCreator // EnsureTopic only
	Parts   kernel.Partitions
	Now     func() time.Time // batch timestamps and the sweeper's clock; default time.Now
	// SweepIntervalMs is the sweeper's period; LoadWaitMs how long Lookup waits for
	// a load before it answers COORDINATOR_LOAD_IN_PROGRESS.
	SweepIntervalMs, LoadWaitMs int64
	// MaxBatchRecords bounds the records the writer gathers into one append (a
	// single write larger than it is appended whole).
	MaxBatchRecords int
	// NoTopic is Lookup's answer while the topic does not exist.
	NoTopic *kerr.Error
	// BeforeSweep, if set, runs first in every sweep, with the image it follows.
	BeforeSweep func(im *kernel.Image)
	// AfterSweep, if set, runs last in every sweep; ctx ends at Close.
	AfterSweep func(ctx context.Context, now time.Time)
}

// writeQueue is how many writes may wait for a shard's writer.
const writeQueue = 256

// Shards is the skeleton: the shard map of one internal topic and the goroutines that
// keep it (package doc). S is the module's shard type. Invariant: every shard in the
// map, and every shard removed from it before Wait returns, has its state's Unload
// called once.
type Shards[S State] struct {
	cfg      Config
	newState func(*Shard) S
	core     *core           // what its shards share
	bg       context.Context // the sweeper's and Go's; ends at Close
	cancel   context.CancelFunc
	wg       sync.WaitGroup // loader-writers, unloads, the sweeper, Go

	mu     sync.Mutex // a leaf lock: see the package doc
	shards map[int32]*Shard
	open   bool // Open was called
	closed bool // Close was called
}

// New returns the shards of cfg.Topic; newState makes a new shard's state (called
// under the map's lock: it must only allocate). Lookups refuse with
// COORDINATOR_NOT_AVAILABLE until Open (or Start).
func New[S State](cfg Config, newState func(*Shard) S) *Shards[S] {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	bg, cancel := context.WithCancel(context.Background())
	c := &Shards[S]{cfg: cfg, newState: newState, bg: bg, cancel: cancel, shards: map[int32]*Shard{}}
	c.core = &core{cfg: &c.cfg, wg: &c.wg, drop: c.drop}
	return c
}

// Open lets lookups load shards (without the sweeper: tests).
func (c *Shards[S]) Open() {
	c.mu.Lock()
	c.open = true
	c.mu.Unlock()
}

// Start opens the shards and starts the sweeper.
func (c *Shards[S]) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.open = true
	c.wg.Add(1)
	go c.sweeper()
}

// Go runs fn on a goroutine Wait waits for; ctx ends at Close. Call it before Close.
func (c *Shards[S]) Go(fn func(ctx context.Context)) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn(c.bg)
	}()
}

// Close unloads every shard (waiting requests get NOT_COORDINATOR), refuses further
// lookups with COORDINATOR_NOT_AVAILABLE and ends the sweeper's and Go's context.
// Wait then waits for the goroutines.
func (c *Shards[S]) Close() {
	c.mu.Lock()
	c.closed = true
	shards := c.shards
	c.shards = map[int32]*Shard{}
	c.mu.Unlock()
	for _, sh := range shards {
		sh.unload(kerr.NotCoordinator)
	}
	c.cancel()
}

// Wait waits for every goroutine of the shards (after Close), or for ctx.
func (c *Shards[S]) Wait(ctx context.Context) error {
	return kernel.WaitGroup(ctx, &c.wg)
}

// Shard returns the shard of partition p if this broker leads it, creating it (and
// starting its load) when it is new, its leader epoch changed or its load failed.
// Otherwise it unloads the partition's shard, if any, and answers NOT_COORDINATOR;
// COORDINATOR_NOT_AVAILABLE before Open and after Close.
func (c *Shards[S]) Shard(p int32) (S, *kerr.Error) {
	sh, e := c.shard(p)
	if e != nil {
		var zero S
		return zero, e
	}
	return sh.state.(S), nil
}

func (c *Shards[S]) shard(p int32) (*Shard, *kerr.Error) {
	tp := kernel.TopicPartition{Topic: c.cfg.Topic, Partition: p}
	epoch, leads := c.cfg.Parts.Leader(tp)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.open || c.closed {
		return nil, kerr.CoordinatorNotAvailable
	}
	sh := c.shards[p]
	if !leads {
		if sh != nil {
			delete(c.shards, p)
			c.unloadLocked(sh, kerr.NotCoordinator)
		}
		return nil, kerr.NotCoordinator
	}
	if sh != nil && sh.epoch == epoch && !sh.load.Failed() {
		return sh, nil
	}
	old := sh
	if old != nil {
		c.unloadLocked(old, kerr.NotCoordinator)
	}
	sh = c.newShard(tp, epoch, old)
	c.shards[p] = sh
	c.wg.Add(1)
	go sh.run()
	return sh, nil
}

// unloadLocked cancels sh and unloads it on a goroutine of its own. Called with c.mu
// held; after Close only cancels, as Close (or whoever removed sh from the map
// before it) unloads it.
func (c *Shards[S]) unloadLocked(sh *Shard, code *kerr.Error) {
	sh.cancel()
	if c.closed {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		sh.unload(code)
	}()
}

// drop removes sh from the map if it is still its partition's shard, and unloads it.
func (c *Shards[S]) drop(sh *Shard, code *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shards[sh.tp.Partition] == sh {
		delete(c.shards, sh.tp.Partition)
	}
	c.unloadLocked(sh, code)
}

// Get returns partition p's shard, loaded or not, without asking who leads it.
func (c *Shards[S]) Get(p int32) (S, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh := c.shards[p]
	if sh == nil {
		var zero S
		return zero, false
	}
	return sh.state.(S), true
}

// Ready returns the shards whose load ended well.
func (c *Shards[S]) Ready() []S {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]S, 0, len(c.shards))
	for _, sh := range c.shards {
		if sh.load.IsReady() {
			out = append(out, sh.state.(S))
		}
	}
	return out
}

// Sum adds up f over the ready shards (a metric's gauge).
func (c *Shards[S]) Sum(f func(S) int) int {
	n := 0
	for _, s := range c.Ready() {
		n += f(s)
	}
	return n
}

// Loading reports whether a shard is still loading.
func (c *Shards[S]) Loading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sh := range c.shards {
		select {
		case <-sh.load.Ready():
		default:
			return true
		}
	}
	return false
}

// PartitionOf returns the partition of the topic that key hashes to, false while
// the topic does not exist (or has no partitions).
func (c *Shards[S]) PartitionOf(key string) (int32, bool) {
	t := c.cfg.Meta.Image().Topic(c.cfg.Topic)
	if t == nil || len(t.Partitions) == 0 {
		return 0, false
	}
	return kafkahash.Partition(key, int32(len(t.Partitions))), true
}

// Lookup returns the loaded shard that coordinates key, or the code to answer:
// Config.NoTopic (no topic yet), NOT_COORDINATOR (another broker leads key's
// partition), COORDINATOR_LOAD_IN_PROGRESS (still loading after LoadWaitMs) or
// COORDINATOR_NOT_AVAILABLE (the load failed, or not open).
func (c *Shards[S]) Lookup(ctx context.Context, key string) (S, *kerr.Error) {
	var zero S
	p, ok := c.PartitionOf(key)
	if !ok {
		return zero, c.cfg.NoTopic
	}
	sh, e := c.shard(p)
	if e != nil {
		return zero, e
	}
	if e := sh.load.Wait(ctx, time.Duration(c.cfg.LoadWaitMs)*time.Millisecond); e != nil {
		return zero, e
	}
	return sh.state.(S), nil
}

// sweeper follows leadership and sweeps the ready shards every SweepIntervalMs. It
// owns one c.wg count.
func (c *Shards[S]) sweeper() {
	defer c.wg.Done()
	t := time.NewTicker(time.Duration(c.cfg.SweepIntervalMs) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.bg.Done():
			return
		case <-t.C:
		}
		im := c.cfg.Meta.Image()
		if c.cfg.BeforeSweep != nil {
			c.cfg.BeforeSweep(im)
		}
		if tt := im.Topic(c.cfg.Topic); tt != nil {
			for p := range tt.Partitions {
				_, _ = c.shard(int32(p)) // loads if led, unloads if not
			}
		}
		now := c.cfg.Now()
		for _, s := range c.Ready() {
			s.Sweep(now)
		}
		if c.cfg.AfterSweep != nil {
			c.cfg.AfterSweep(c.bg, now)
		}
	}
}

// EnsureTopic returns the topic, creating it first when it does not exist (Kafka
// creates an internal topic on the first FindCoordinator that needs it): with
// partitions partitions and rf replicas, or as many as there are live brokers when
// fewer (logged; rfKey names the setting), and the configs configs(rf) returns.
func (c *Shards[S]) EnsureTopic(ctx context.Context, partitions int32, rf int16, rfKey string, configs func(rf int16) map[string]string) (*kernel.TopicImage, error) {
	im := c.cfg.Meta.Image()
	if t := im.Topic(c.cfg.Topic); t != nil {
		return t, nil
	}
	live := 0
	for _, b := range im.Brokers {
		if !b.Fenced {
			live++
		}
	}
	if live > 0 && int(rf) > live {
		c.cfg.Log.Warn(fmt.Sprintf("fewer live brokers than %s; creating %s with fewer replicas", rfKey, c.cfg.Topic),
			rfKey, rf, "live_brokers", live)
		rf = int16(live)
	}
	return c.cfg.Creator.CreateTopic(ctx, c.cfg.Topic, partitions, rf, configs(rf))
}

// CheckIntervals validates the settings every coordinator has: sweep_interval_ms
// (Config.SweepIntervalMs) and load_wait_ms (Config.LoadWaitMs).
func CheckIntervals(sweepIntervalMs, loadWaitMs int64) error {
	switch {
	case sweepIntervalMs <= 0:
		return errors.New("sweep_interval_ms must be > 0")
	case loadWaitMs < 0:
		return errors.New("load_wait_ms must be >= 0")
	}
	return nil
}

// LookupDeps looks up what every coordinator needs in Provision: metadata (images,
// topic creation) and replication (the internal topic's partitions).
func LookupDeps(ctx kernel.Context, meta *kernel.Metadata, creator *kernel.TopicCreator, parts *kernel.Partitions) error {
	var err error
	if *meta, err = kernel.LookupAs[kernel.Metadata](ctx, "metadata"); err != nil {
		return err
	}
	if *creator, err = kernel.LookupAs[kernel.TopicCreator](ctx, "metadata"); err != nil {
		return fmt.Errorf("internal topic: %w", err)
	}
	if *parts, err = kernel.LookupAs[kernel.Partitions](ctx, "replication"); err != nil {
		return fmt.Errorf("internal topic: %w", err)
	}
	return nil
}

// BrokerConfig resolves the broker configs a coordinator follows: b's static
// configs under the image's dynamic cluster-wide and per-broker ones (im may be nil).
func BrokerConfig(b kernel.BrokerInfo, im *kernel.Image) kconfig.Broker {
	var dynDefault, dynNode map[string]string
	if im != nil {
		dynDefault = im.BrokerConfigs[""]
		dynNode = im.BrokerConfigs[strconv.FormatInt(int64(b.NodeID), 10)]
	}
	return kconfig.ResolveBroker(kconfig.MergeBroker(b.StaticConfigs, dynDefault, dynNode))
}
