package replication

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/interbroker"
	"github.com/sluicehq/sluice/internal/kclient"
	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/internal/rate"
	"github.com/sluicehq/sluice/kernel"
)

// Replica fetchers: the follower side of replication. A fetcher is one goroutine and
// one connection to a source broker (a leader), serving one shard (of
// num.replica.fetchers) of the partitions this broker follows from it; each round it
// sends one Fetch for all of them (replica id = this broker) and hands every
// partition's answer to the Partition (appendFetched, truncateDiverging,
// fixOutOfRange). Images decide the assignment (fetcherSet.assign); a fetcher left
// with no partitions stops.

// replicaConfig is the replica.* broker configuration, resolved from every image.
type replicaConfig struct {
	lagMaxMs     int64         // replica.lag.time.max.ms
	fetchMax     int32         // replica.fetch.max.bytes (per partition)
	respMax      int32         // replica.fetch.response.max.bytes
	waitMaxMs    int32         // replica.fetch.wait.max.ms
	minBytes     int32         // replica.fetch.min.bytes
	backoff      time.Duration // replica.fetch.backoff.ms
	fetchers     int           // num.replica.fetchers
	listener     string        // inter.broker.listener.name ("" = the first listener)
	socketTimout time.Duration // how long a fetch may take beyond its wait

	// Replication throttles (throttle.go): bytes/s, 0 = none.
	leaderRate     float64     // leader.replication.throttled.rate
	followerRate   float64     // follower.replication.throttled.rate
	throttleWindow rate.Config // replication.quota.window.*
}

func newReplicaConfig(b *kconfig.Broker) *replicaConfig {
	return &replicaConfig{
		lagMaxMs:     max(b.ReplicaLagTimeMaxMs, 1),
		fetchMax:     b.ReplicaFetchMaxBytes,
		respMax:      b.ReplicaFetchResponseMaxBytes,
		waitMaxMs:    max(b.ReplicaFetchWaitMaxMs, 0),
		minBytes:     max(b.ReplicaFetchMinBytes, 1),
		backoff:      time.Duration(max(b.ReplicaFetchBackoffMs, 0)) * time.Millisecond,
		fetchers:     int(max(b.NumReplicaFetchers, 1)),
		listener:     b.InterBrokerListenerName,
		socketTimout: 30 * time.Second, // Kafka's replica.socket.timeout.ms default

		leaderRate:     replicationRate(b.LeaderReplicationThrottledRate),
		followerRate:   replicationRate(b.FollowerReplicationThrottledRate),
		throttleWindow: replicationWindow(b),
	}
}

// follow is one partition a fetcher fetches: the partition and the leader and epoch
// the image that assigned it named.
type follow struct {
	p      *Partition
	leader int32
	epoch  int32
	// delayUntil: no fetch before (after an error of this partition); under fetcher.mu.
	delayUntil time.Time
}

// errAuth marks a connect that failed at the TLS handshake or the SASL login (or has
// no credentials): retrying soon would fail the same way.
var errAuth = errors.New("inter-broker authentication failed")

// authBackoff is the least wait after errAuth.
const authBackoff = 5 * time.Second

// fetcherKey names a fetcher: its source broker and shard.
type fetcherKey struct {
	leader int32
	shard  int
}

// shardOf spreads partitions over num.replica.fetchers fetchers per source broker.
func shardOf(tp kernel.TopicPartition, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(tp.Topic))
	return int((h.Sum32()*31 + uint32(tp.Partition)) % uint32(n))
}

// fetcherSet owns the module's fetchers.
type fetcherSet struct {
	m  *Module
	mu sync.Mutex // fetcherSet.mu before fetcher.mu; never held while taking Partition.mu
	by map[fetcherKey]*fetcher
	// stopped: stopAll ran; no fetcher starts any more.
	stopped bool
	wg      sync.WaitGroup
	// diskLow: the fetchers stopped appending because the data dir is below its
	// free-space reserve (logged once per episode, by whichever fetcher sees it first).
	diskLow atomic.Bool
}

// diskRecheck is how often a fetcher paused by a low disk looks again (the guard
// samples the file system once a second).
const diskRecheck = time.Second

// diskFull reports whether follower appends must stop: the data dir is below its
// free-space reserve (kernel/diskguard). Going low and coming back are each logged
// once across the module's fetchers.
func (fs *fetcherSet) diskFull() bool {
	err := fs.m.broker.AdmitWrite(0)
	switch {
	case err != nil && fs.diskLow.CompareAndSwap(false, true):
		fs.m.log.Warn("replica fetchers paused: data dir below its free-space reserve; followed partitions fall out of ISR until space is freed",
			"err", err)
	case err == nil && fs.diskLow.CompareAndSwap(true, false):
		fs.m.log.Info("replica fetchers resume: data dir has space again")
	}
	return err != nil
}

func newFetcherSet(m *Module) *fetcherSet {
	return &fetcherSet{m: m, by: map[fetcherKey]*fetcher{}}
}

// assign makes the fetchers fetch exactly want (partition -> leader and epoch to
// follow), sharded by n: partitions leave the fetchers that no longer own them, new
// fetchers start, empty ones stop. A partition whose leader and epoch did not change
// keeps its state (and its error delay).
func (fs *fetcherSet) assign(want map[kernel.TopicPartition]*follow, n int) {
	byKey := map[fetcherKey]map[kernel.TopicPartition]*follow{}
	for tp, f := range want {
		k := fetcherKey{leader: f.leader, shard: shardOf(tp, n)}
		if byKey[k] == nil {
			byKey[k] = map[kernel.TopicPartition]*follow{}
		}
		byKey[k][tp] = f
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.stopped {
		return
	}
	for k, f := range fs.by {
		if byKey[k] == nil {
			f.cancel()
			delete(fs.by, k)
		}
	}
	for k, parts := range byKey {
		f := fs.by[k]
		if f == nil {
			f = fs.start(k)
		}
		f.set(parts)
	}
}

// apply moves the partitions of changes between the fetchers (sharded by n, as the
// last assign), starting fetchers that get their first partition and stopping the
// ones left empty.
func (fs *fetcherSet) apply(changes []followChange, n int) {
	if len(changes) == 0 {
		return
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.stopped {
		return
	}
	poke := map[*fetcher]bool{}
	for _, c := range changes {
		if c.old != nil {
			if f := fs.by[fetcherKey{leader: c.old.leader, shard: shardOf(c.tp, n)}]; f != nil {
				f.mu.Lock()
				delete(f.parts, c.tp)
				f.mu.Unlock()
				poke[f] = true
			}
		}
		if c.new != nil {
			k := fetcherKey{leader: c.new.leader, shard: shardOf(c.tp, n)}
			f := fs.by[k]
			if f == nil {
				f = fs.start(k)
			}
			f.mu.Lock()
			f.parts[c.tp] = c.new
			f.mu.Unlock()
			poke[f] = true
		}
	}
	for f := range poke {
		f.mu.Lock()
		empty := len(f.parts) == 0
		f.mu.Unlock()
		if empty {
			f.cancel()
			delete(fs.by, f.key)
			continue
		}
		f.poke()
	}
}

// start starts the fetcher for k (fs.mu held).
func (fs *fetcherSet) start(k fetcherKey) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fetcher{fs: fs, m: fs.m, key: k, ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1), parts: map[kernel.TopicPartition]*follow{}}
	fs.by[k] = f
	fs.wg.Add(1)
	go f.run()
	return f
}

// stopAll stops every fetcher and waits for their goroutines; no fetcher starts after.
func (fs *fetcherSet) stopAll() {
	fs.mu.Lock()
	fs.stopped = true
	for k, f := range fs.by {
		f.cancel()
		delete(fs.by, k)
	}
	fs.mu.Unlock()
	fs.wg.Wait()
}

// pauseFetching idles (true) or resumes every fetcher: a test hook standing for a
// follower that stopped fetching without leaving the cluster.
func (m *Module) pauseFetching(on bool) {
	m.fetchPaused.Store(on)
	m.fetchers.kickAll()
}

// kickAll wakes every idle fetcher (after the test pause hook is lifted).
func (fs *fetcherSet) kickAll() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, f := range fs.by {
		f.poke()
	}
}

// partitions returns how many partitions the fetchers follow, and how many fetchers
// run (metrics, tests).
func (fs *fetcherSet) partitions() (parts, fetchers int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, f := range fs.by {
		f.mu.Lock()
		parts += len(f.parts)
		f.mu.Unlock()
	}
	return parts, len(fs.by)
}

// fetcher fetches one shard of the partitions led by one broker.
type fetcher struct {
	fs     *fetcherSet
	m      *Module
	key    fetcherKey
	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{} // cap 1: the assignment changed

	mu    sync.Mutex
	parts map[kernel.TopicPartition]*follow
}

func (f *fetcher) poke() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// set replaces the fetcher's partitions.
func (f *fetcher) set(parts map[kernel.TopicPartition]*follow) {
	f.mu.Lock()
	for tp, nf := range parts {
		if old := f.parts[tp]; old != nil && old.p == nf.p && old.epoch == nf.epoch {
			parts[tp] = old
		}
	}
	f.parts = parts
	f.mu.Unlock()
	f.poke()
}

// current reports whether fl is still the fetcher's state for tp.
func (f *fetcher) current(tp kernel.TopicPartition, fl *follow) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.parts[tp] == fl
}

// delay keeps tp out of fetches for d (after an error of that partition).
func (f *fetcher) delay(fl *follow, d time.Duration) {
	f.mu.Lock()
	fl.delayUntil = time.Now().Add(d)
	f.mu.Unlock()
}

// ready returns the partitions to fetch now, and how long until a delayed one is due
// (0: none delayed).
func (f *fetcher) ready() (map[kernel.TopicPartition]*follow, time.Duration) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[kernel.TopicPartition]*follow, len(f.parts))
	var next time.Duration
	for tp, fl := range f.parts {
		if d := fl.delayUntil.Sub(now); d > 0 {
			if next == 0 || d < next {
				next = d
			}
			continue
		}
		out[tp] = fl
	}
	return out, next
}

// sleep waits d, or less when the fetcher stops or its assignment changes; false when
// it stopped.
func (f *fetcher) sleep(d time.Duration) bool {
	if d <= 0 {
		return f.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.ctx.Done():
		return false
	case <-t.C:
	case <-f.kick:
	}
	return true
}

// run is the fetcher's loop, until its context ends.
func (f *fetcher) run() {
	defer f.fs.wg.Done()
	var conn *kclient.Conn
	var vers map[int16]int16
	failing := false // the connection failed last time: log the next failure at debug
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for f.ctx.Err() == nil {
		cfg := f.m.rcfg.Load()
		if f.m.fetchPaused.Load() {
			if conn != nil {
				_ = conn.Close()
				conn = nil
			}
			if !f.sleep(time.Hour) {
				return
			}
			continue
		}
		if f.fs.diskFull() {
			// Not fetching at all (rather than fetching and dropping): the leader
			// sees this follower stop and, after replica.lag.time.max.ms, takes it
			// out of ISR, so acks=all producers are not held up by a replica that
			// cannot write.
			if conn != nil {
				_ = conn.Close()
				conn = nil
			}
			if !f.sleep(diskRecheck) {
				return
			}
			continue
		}
		batch, next := f.ready()
		if len(batch) == 0 {
			if next == 0 {
				next = time.Hour // until a kick
			}
			if !f.sleep(next) {
				return
			}
			continue
		}
		batch, held := f.unthrottled(batch, cfg)
		if len(batch) == 0 {
			// Every partition due is a throttled replica and the follower's throttled
			// rate is over its limit: wait until it is back under.
			if !f.sleep(held) {
				return
			}
			continue
		}
		if conn != nil && !conn.ReauthAfter().IsZero() && time.Now().After(conn.ReauthAfter()) {
			// The SASL session ends soon (connections.max.reauth.ms at the leader):
			// log in again on a new connection before the leader closes this one.
			_ = conn.Close()
			conn = nil
		}
		if conn == nil {
			var err error
			conn, vers, err = f.connect(cfg)
			if err != nil {
				d := cfg.backoff
				if errors.Is(err, errAuth) {
					// Refused credentials or certificates stay refused until an
					// operator acts: retry slowly.
					d = max(d, authBackoff)
				}
				if !f.backOff(&failing, "replica fetcher cannot reach the leader", err, d) {
					return
				}
				continue
			}
		}
		req, sent := f.build(batch, vers, cfg)
		ctx, cancel := context.WithTimeout(f.ctx, time.Duration(cfg.waitMaxMs)*time.Millisecond+cfg.socketTimout)
		r, err := conn.Request(ctx, req)
		cancel()
		if err != nil {
			_ = conn.Close()
			conn = nil
			if !f.backOff(&failing, "replica fetch failed", err, cfg.backoff) {
				return
			}
			continue
		}
		failing = false
		if f.m.fetchPaused.Load() {
			continue // paused while the fetch was in flight: as if it never came back
		}
		resp := r.(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 {
			f.m.log.Warn("replica fetch refused", "leader", f.key.leader, "err", kerr.ErrorForCode(resp.ErrorCode))
			if !f.sleep(cfg.backoff) {
				return
			}
			continue
		}
		if !f.handle(resp, sent, conn, vers, cfg) {
			_ = conn.Close()
			conn = nil
		}
	}
}

// backOff handles a failed attempt: it logs err (at Warn the first time in a row,
// then at Debug) and waits d. It returns false when the fetcher's context is done,
// before logging if it already was.
func (f *fetcher) backOff(failing *bool, msg string, err error, d time.Duration) bool {
	if f.ctx.Err() != nil {
		return false
	}
	if *failing {
		f.m.log.Debug(msg, "leader", f.key.leader, "err", err)
	} else {
		*failing = true
		f.m.log.Warn(msg, "leader", f.key.leader, "err", err)
	}
	return f.sleep(d)
}

// connect dials the leader's inter-broker listener (from the current image) and
// negotiates versions.
func (f *fetcher) connect(cfg *replicaConfig) (*kclient.Conn, map[int16]int16, error) {
	// A fetch answer is bounded by replica.fetch.response.max.bytes, except that the
	// first batch is returned whole (KIP-74) whatever its size.
	ctx, cancel := context.WithTimeout(f.ctx, cfg.socketTimout)
	defer cancel()
	conn, vers, err := f.m.dialBroker(ctx, cfg, f.key.leader, fmt.Sprintf("sluice-replica-fetcher-%d-%d", f.m.broker.NodeID, f.key.shard),
		max(2*cfg.respMax, kclient.DefaultMaxResponseBytes))
	if err != nil {
		return nil, nil, err
	}
	if v, ok := vers[kmsg.Fetch.Int16()]; !ok || v < 4 {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("broker %d does not support Fetch v4+", f.key.leader)
	}
	return conn, vers, nil
}

// dialBroker dials broker id's inter-broker listener (from the current image) as
// clientID, with this broker's TLS and SASL settings for it, and negotiates versions.
func (m *Module) dialBroker(ctx context.Context, cfg *replicaConfig, id int32, clientID string, maxResp int32) (*kclient.Conn, map[int16]int16, error) {
	sec := m.sec
	if sec == nil { // a module built by hand (tests): plaintext on the configured listener
		sec = &interbroker.Security{Listener: cfg.listener, Protocol: kernel.ProtocolPlaintext}
	}
	conn, vers, err := sec.Dial(ctx, m.meta.Image(), id, clientID, maxResp)
	if err != nil && (errors.Is(err, kclient.ErrSASL) || errors.Is(err, kclient.ErrTLS)) {
		err = fmt.Errorf("%w: %w", errAuth, err)
	}
	return conn, vers, err
}

// unthrottled returns batch without its throttled replicas (throttle.go) while the
// follower's throttled rate is over follower.replication.throttled.rate, and how long
// it is over (at most a second: the rate is looked at again then).
func (f *fetcher) unthrottled(batch map[kernel.TopicPartition]*follow, cfg *replicaConfig) (map[kernel.TopicPartition]*follow, time.Duration) {
	over := f.m.rthrottle.over(followerSide, cfg, f.m.now())
	if over <= 0 {
		return batch, 0
	}
	for tp, fl := range batch {
		if f.throttled(fl) {
			delete(batch, tp)
		}
	}
	return batch, min(over, time.Second)
}

// throttled reports whether fl is a follower-throttled replica out of its ISR.
func (f *fetcher) throttled(fl *follow) bool {
	pl := fl.p.place.Load()
	return pl.followerThrottled && !slices.Contains(pl.isr, f.m.broker.NodeID)
}

// sentPart is one partition of a fetch in flight.
type sentPart struct {
	tp     kernel.TopicPartition
	fl     *follow
	offset int64
	// throttled: a follower-throttled replica; what it fetches counts against
	// follower.replication.throttled.rate.
	throttled bool
}

// sentKey finds a response partition: by topic ID (v13+) or name.
type sentKey struct {
	topic string
	id    [16]byte
	part  int32
}

// version picks the highest version of key both sides support.
func version(vers map[int16]int16, r kmsg.Request) int16 {
	return min(r.MaxVersion(), vers[r.Key()])
}

// build makes the Fetch for batch (a full fetch, no session: the leader sees every
// partition's position every round, which is its ISR bookkeeping).
func (f *fetcher) build(batch map[kernel.TopicPartition]*follow, vers map[int16]int16, cfg *replicaConfig) (*kmsg.FetchRequest, map[sentKey]*sentPart) {
	req := kmsg.NewPtrFetchRequest()
	v := version(vers, req)
	req.SetVersion(v)
	self := f.m.broker.NodeID
	req.ReplicaID = self
	req.ReplicaState.ID = self
	req.MaxWaitMillis = cfg.waitMaxMs
	req.MinBytes = cfg.minBytes
	req.MaxBytes = cfg.respMax
	req.IsolationLevel = 0
	req.SessionID, req.SessionEpoch = 0, -1
	sent := make(map[sentKey]*sentPart, len(batch))
	topics := map[string]int{}
	for tp, fl := range batch {
		offset, lastEpoch, logStart := fl.p.fetchPosition()
		i, ok := topics[tp.Topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = tp.Topic, fl.p.topicID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topics[tp.Topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = tp.Partition
		rp.CurrentLeaderEpoch = fl.epoch
		rp.FetchOffset = offset
		rp.LastFetchedEpoch = lastEpoch
		rp.LogStartOffset = logStart
		rp.PartitionMaxBytes = cfg.fetchMax
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		sent[f.sentKeyFor(v, tp.Topic, fl.p.topicID, tp.Partition)] = &sentPart{tp: tp, fl: fl, offset: offset, throttled: f.throttled(fl)}
	}
	return req, sent
}

func (f *fetcher) sentKeyFor(v int16, topic string, id [16]byte, part int32) sentKey {
	if v >= 13 {
		return sentKey{id: id, part: part}
	}
	return sentKey{topic: topic, part: part}
}

// handle applies a fetch answer partition by partition. It returns false when the
// connection should be dropped (a ListOffsets on it failed). Partitions answered
// OFFSET_OUT_OF_RANGE are handled last: their ListOffsets requests reuse the
// connection's read buffer, which the other partitions' records alias.
func (f *fetcher) handle(resp *kmsg.FetchResponse, sent map[sentKey]*sentPart, conn *kclient.Conn, vers map[int16]int16, cfg *replicaConfig) bool {
	var oor []*sentPart
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			sp := sent[f.sentKeyFor(resp.Version, t.Topic, t.TopicID, rp.Partition)]
			if sp == nil || !f.current(sp.tp, sp.fl) {
				continue // not asked, or re-targeted meanwhile
			}
			if rp.ErrorCode == kerr.OffsetOutOfRange.Code {
				oor = append(oor, sp)
				continue
			}
			f.handlePart(sp, rp, cfg)
		}
	}
	for _, sp := range oor {
		if !f.outOfRange(sp, conn, vers, cfg) {
			return false
		}
	}
	return true
}

// handlePart applies one partition's answer (other than OFFSET_OUT_OF_RANGE).
func (f *fetcher) handlePart(sp *sentPart, rp *kmsg.FetchResponseTopicPartition, cfg *replicaConfig) {
	fl, p := sp.fl, sp.fl.p
	log := f.m.log
	switch code := rp.ErrorCode; {
	case code == 0 && (rp.DivergingEpoch.Epoch >= 0 || rp.DivergingEpoch.EndOffset >= 0):
		to, err := p.truncateDiverging(fl.leader, fl.epoch, sp.offset, rp.DivergingEpoch)
		if err != nil {
			log.Error("follower truncation", "topic", sp.tp.Topic, "partition", sp.tp.Partition, "err", err)
			f.delay(fl, cfg.backoff)
		} else if to == sp.offset {
			// Nothing to cut: the same answer would come again at once.
			log.Warn("diverging epoch answered for a log that holds nothing past it", "topic", sp.tp.Topic, "partition", sp.tp.Partition,
				"leader", fl.leader, "log_end", sp.offset, "diverging_epoch", rp.DivergingEpoch.Epoch, "diverging_end_offset", rp.DivergingEpoch.EndOffset)
			f.delay(fl, cfg.backoff)
		} else if to >= 0 {
			log.Info("follower truncated to the divergence point", "topic", sp.tp.Topic, "partition", sp.tp.Partition,
				"leader", fl.leader, "leader_epoch", fl.epoch, "log_end", sp.offset, "diverging_epoch", rp.DivergingEpoch.Epoch,
				"diverging_end_offset", rp.DivergingEpoch.EndOffset, "truncated_to", to)
		}
	case code == 0 && len(rp.RecordBatches) > 0 && f.m.broker.AdmitWrite(int64(len(rp.RecordBatches))) != nil:
		// The disk went below the reserve during the fetch: drop the answer; the run
		// loop stops fetching (fetcherSet.diskFull) until space is back.
		f.delay(fl, diskRecheck)
	case code == 0 && len(rp.RecordBatches) > 0 && p.admitWrite(int64(len(rp.RecordBatches))) != nil:
		// This partition's log dir is below its reserve (log.dirs on several disks):
		// drop the answer and try it again later; the other partitions go on.
		f.delay(fl, diskRecheck)
	case code == 0:
		if sp.throttled {
			f.m.rthrottle.record(followerSide, cfg, int64(len(rp.RecordBatches)), f.m.now())
		}
		_, err := p.appendFetched(fl.leader, fl.epoch, sp.offset, rp.RecordBatches, rp.HighWatermark, rp.LogStartOffset)
		switch {
		case err == errRefetch: // not an error: fetch again after the backoff
			f.delay(fl, cfg.backoff)
		case err != nil:
			log.Error("follower append", "topic", sp.tp.Topic, "partition", sp.tp.Partition, "leader", fl.leader, "err", err)
			f.delay(fl, cfg.backoff)
		}
	default:
		// NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC...: one
		// side's image is behind; a newer image re-targets the partition. Retry after
		// the backoff meanwhile.
		if log.Enabled(f.ctx, slog.LevelDebug) {
			log.Debug("replica fetch partition error", "topic", sp.tp.Topic, "partition", sp.tp.Partition, "leader", fl.leader, "err", kerr.ErrorForCode(code))
		}
		f.delay(fl, cfg.backoff)
	}
}

// outOfRange handles OFFSET_OUT_OF_RANGE: the leader's log start and end decide
// whether the log is cut back or restarted (fixOutOfRange). False: the connection
// broke.
func (f *fetcher) outOfRange(sp *sentPart, conn *kclient.Conn, vers map[int16]int16, cfg *replicaConfig) bool {
	fl, p := sp.fl, sp.fl.p
	log := f.m.log
	start, end, err := f.leaderOffsets(conn, vers, sp)
	if err != nil {
		log.Warn("follower offset out of range; leader offsets unknown", "topic", sp.tp.Topic, "partition", sp.tp.Partition, "err", err)
		f.delay(fl, cfg.backoff)
		var ke *kerr.Error
		return errors.As(err, &ke) || errors.Is(err, errLeaderRange)
	}
	what, err := p.fixOutOfRange(fl.leader, fl.epoch, sp.offset, start, end)
	switch {
	case err != nil:
		log.Error("follower offset out of range", "topic", sp.tp.Topic, "partition", sp.tp.Partition, "err", err)
		f.delay(fl, cfg.backoff)
	case what != "":
		log.Warn("follower offset out of range: log "+what, "topic", sp.tp.Topic, "partition", sp.tp.Partition,
			"log_end", sp.offset, "leader_log_start", start, "leader_log_end", end)
	default:
		f.delay(fl, cfg.backoff)
	}
	return true
}

// leaderOffsets asks the leader (ListOffsets as a replica: latest = its log end) for
// the partition's log start and log end offsets.
func (f *fetcher) leaderOffsets(conn *kclient.Conn, vers map[int16]int16, sp *sentPart) (start, end int64, err error) {
	ask := func(ts int64) (int64, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		v := version(vers, req)
		if v < 1 {
			return -1, fmt.Errorf("ListOffsets v1+ unsupported: %w", errLeaderRange)
		}
		req.SetVersion(v)
		req.ReplicaID = f.m.broker.NodeID
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = sp.tp.Topic
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.CurrentLeaderEpoch, p.Timestamp = sp.tp.Partition, sp.fl.epoch, ts
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
		defer cancel()
		r, err := conn.Request(ctx, req)
		if err != nil {
			return -1, err
		}
		resp := r.(*kmsg.ListOffsetsResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return -1, fmt.Errorf("malformed ListOffsets answer: %w", errLeaderRange)
		}
		rp := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
			return -1, err
		}
		return rp.Offset, nil
	}
	if start, err = ask(-2); err != nil {
		return -1, -1, err
	}
	if end, err = ask(-1); err != nil {
		return -1, -1, err
	}
	return start, end, nil
}
