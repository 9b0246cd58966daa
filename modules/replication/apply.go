package replication

import (
	"context"
	"errors"
	"hash/maphash"
	"maps"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/kernel"
)

// Applying images: what changed, not the whole image.
//
// applyImage (the subscription goroutine, one image at a time, in order) keeps the
// last image it applied whole (Module.last) and visits only the topics that differ
// from it (kernel.DiffTopics skips the subtrees both images share), and within a
// changed topic only the partitions whose image differs (or all of them when the
// topic's configs or ID changed). Everything is walked again only for the first
// image and when the broker configs the topics resolve against change. Partitions
// opened outside the subscription (on demand by a request, or by the retry of a
// failed open) are remembered in Module.adhoc and checked against the next image
// applied, because the diff between two images that both lack their topic would not
// report them.
//
// Invariants:
//   - A partition is published in Module.parts only after its placement is set.
//   - Images are applied in version order; one older than an image a lazy open acted
//     on is skipped (Module.applied), and Module.last advances only when an image's
//     removals ran whole, so the next diff (from Module.last) redoes whatever a
//     skipped or interrupted apply left out (opens and updates are idempotent).
//   - A partition whose log failed to open has a record in Module.failed: requests on
//     it answer KAFKA_STORAGE_ERROR (never the retriable NOT_LEADER_OR_FOLLOWER), the
//     request path does not try to open it, and retryLoop reopens it with an
//     exponential backoff (openRetryMin doubling to openRetryMax); an image that
//     changes the partition retries at once. The record goes when an open succeeds
//     or the partition leaves this node.
//   - The fetchers follow exactly the local, published partitions that this node
//     replicates and does not lead (Module.follows), kept in step by refollow with
//     the partitions an apply touched.
//   - Opens of one image run in parallel (openWorkers); opens and removals of one
//     partition are serialised by its stripe of Module.openLocks, so a re-created
//     topic's open waits for the removal of the old incarnation.

const (
	// openRetryMin and openRetryMax bound the backoff between retries of a failed open.
	openRetryMin = time.Second
	openRetryMax = time.Minute
)

// openWorkers is how many partitions one image opens at once.
func openWorkers() int { return min(8, 2*runtime.GOMAXPROCS(0)) }

// openFailure is a partition whose log failed to open.
type openFailure struct {
	id      [16]byte // the topic incarnation it failed for
	err     error
	backoff time.Duration
	next    time.Time // next retry
}

// adhocOpen is a partition opened outside the subscription, from image version.
type adhocOpen struct{ version uint64 }

// openLock returns the stripe of Module.openLocks that serialises opening and
// removing tp.
func (m *Module) openLock(tp kernel.TopicPartition) *sync.Mutex {
	var h maphash.Hash
	h.SetSeed(m.lockSeed)
	h.WriteString(tp.Topic)
	return &m.openLocks[(h.Sum64()+uint64(tp.Partition))%uint64(len(m.openLocks))]
}

// openJob is one open of an apply.
type openJob struct {
	tp  kernel.TopicPartition
	id  [16]byte
	pi  *kernel.PartitionImage
	cfg *kconfig.Topic
}

// applier is the state of one applyImage.
type applier struct {
	m       *Module
	im      *kernel.Image
	bcfg    map[string]string
	now     int64
	opens   []openJob
	remove  []kernel.TopicPartition // local partitions (or failed ones) no longer hosted here
	touched []*Partition            // partitions whose placement may have changed
	visited int
}

// applyImage makes the local partitions match an image. Called by the metadata
// subscription, one image at a time, in order. Logs are opened and removed without
// holding Module.mu, so creating or deleting topics does not stall the request path.
func (m *Module) applyImage(im *kernel.Image) {
	if im == nil {
		return
	}
	m.mu.Lock()
	if m.stopping || m.parts == nil || im.Version < m.applied {
		// A lazy open already acted on a newer image; that one (or a later one) is
		// still to come and will be applied.
		m.mu.Unlock()
		return
	}
	m.applied = im.Version
	adhoc := m.adhoc
	m.adhoc = nil
	m.mu.Unlock()

	bcfg := m.brokerConfigs(im)
	full := m.last == nil || m.forceFull || !maps.Equal(bcfg, m.lastBcfg)
	if full {
		m.setBrokerLimits(bcfg)
	}
	a := &applier{m: m, im: im, bcfg: bcfg, now: m.now().UnixMilli()}
	if full {
		for _, t := range im.Topics() {
			a.topic(nil, t)
		}
		a.sweep()
	} else {
		kernel.DiffTopics(m.last, im, a.topic)
		for tp, o := range adhoc {
			if o.version > im.Version {
				m.noteAdhoc(tp, o.version) // for a later image
				continue
			}
			a.recheck(tp)
		}
	}
	m.applyVisited.Add(int64(a.visited))
	a.runOpens()
	if a.runRemovals() {
		m.last, m.lastBcfg = im, bcfg
	} else {
		// A lazy open acted on a newer image meantime: it decides, and the next
		// diff starts from the image before this one again.
		for tp := range adhoc {
			m.noteAdhoc(tp, adhoc[tp].version)
		}
	}
	if full {
		m.refollowAll()
	} else {
		m.refollow(a.touched)
	}
	m.appliedDone.Store(im.Version)
}

// noteAdhoc records tp as opened outside the subscription from image version.
func (m *Module) noteAdhoc(tp kernel.TopicPartition, version uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.adhoc == nil {
		m.adhoc = map[kernel.TopicPartition]adhocOpen{}
	}
	if o, ok := m.adhoc[tp]; !ok || o.version < version {
		m.adhoc[tp] = adhocOpen{version: version}
	}
}

// samePartition reports whether two partition images place the replica alike.
func samePartition(a, b *kernel.PartitionImage) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch &&
		slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR) &&
		slices.Equal(a.AddingReplicas, b.AddingReplicas) && slices.Equal(a.RemovingReplicas, b.RemovingReplicas)
}

// topic applies one changed topic (before nil: new or full walk; after nil: deleted).
func (a *applier) topic(before, after *kernel.TopicImage) {
	m := a.m
	same := before != nil && after != nil && before.ID == after.ID && maps.Equal(before.Configs, after.Configs)
	n := 0
	if before != nil {
		n = len(before.Partitions)
	}
	if after != nil {
		n = max(n, len(after.Partitions))
	}
	var cfg *kconfig.Topic
	for i := range n {
		var pi, was *kernel.PartitionImage
		if after != nil && i < len(after.Partitions) {
			pi = &after.Partitions[i]
		}
		if before != nil && i < len(before.Partitions) {
			was = &before.Partitions[i]
		}
		if same && pi != nil && was != nil && samePartition(pi, was) {
			continue
		}
		a.visited++
		tp := kernel.TopicPartition{Topic: topicName(after, before), Partition: int32(i)}
		if pi == nil || !m.hosts(pi) {
			if m.hasLocal(tp) {
				a.remove = append(a.remove, tp)
			}
			continue
		}
		if cfg == nil {
			c := kconfig.ResolveTopic(after.Configs, a.bcfg)
			cfg = &c
		}
		a.want(tp, after.ID, pi, cfg)
	}
}

// want makes tp an open partition of incarnation id with placement pi.
func (a *applier) want(tp kernel.TopicPartition, id [16]byte, pi *kernel.PartitionImage, cfg *kconfig.Topic) {
	m := a.m
	m.mu.RLock()
	p := m.parts[tp]
	m.mu.RUnlock()
	if p != nil && p.topicID == id {
		if p.update(a.im.Version, pi, cfg, a.now) {
			p.changed()
		}
		a.touched = append(a.touched, p)
		return
	}
	if p != nil {
		a.touched = append(a.touched, p) // the old incarnation, dropped by open
	}
	a.opens = append(a.opens, openJob{tp: tp, id: id, pi: pi, cfg: cfg})
}

// recheck applies the image to a partition opened outside the subscription.
func (a *applier) recheck(tp kernel.TopicPartition) {
	a.visited++
	t := a.im.Topic(tp.Topic)
	if t == nil || int(tp.Partition) >= len(t.Partitions) || !a.m.hosts(&t.Partitions[tp.Partition]) {
		a.remove = append(a.remove, tp)
		return
	}
	c := kconfig.ResolveTopic(t.Configs, a.bcfg)
	a.want(tp, t.ID, &t.Partitions[tp.Partition], &c)
}

// sweep (a full walk) marks every local or failed partition the image does not host
// here for removal.
func (a *applier) sweep() {
	m := a.m
	m.mu.RLock()
	defer m.mu.RUnlock()
	// (Partitions of topics in the image that are hosted elsewhere were marked by
	// topic.)
	gone := func(tp kernel.TopicPartition) bool {
		t := a.im.Topic(tp.Topic)
		return t == nil || int(tp.Partition) >= len(t.Partitions)
	}
	for tp := range m.parts {
		if gone(tp) {
			a.remove = append(a.remove, tp)
		}
	}
	for tp := range m.failed {
		if gone(tp) {
			a.remove = append(a.remove, tp)
		}
	}
}

// runOpens opens the apply's new partitions, openWorkers at a time.
func (a *applier) runOpens() {
	if len(a.opens) == 0 {
		return
	}
	m := a.m
	workers := min(openWorkers(), len(a.opens))
	jobs := make(chan int)
	opened := make([]*Partition, len(a.opens))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				j := &a.opens[i]
				p, err := m.open(j.tp, j.id, a.im.Version, j.pi, j.cfg)
				if err != nil {
					continue // recorded (and logged) by open
				}
				if p.update(a.im.Version, j.pi, j.cfg, m.now().UnixMilli()) {
					p.changed()
				}
				opened[i] = p
			}
		}()
	}
	for i := range a.opens {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for _, p := range opened {
		if p != nil {
			a.touched = append(a.touched, p)
		}
	}
}

// runRemovals closes and removes the partitions that left this node, openWorkers at
// a time. false when a lazy open acted on a newer image meanwhile (it decides then;
// the remaining removals wait for a later image).
func (a *applier) runRemovals() bool {
	m := a.m
	if len(a.remove) == 0 {
		m.mu.RLock()
		defer m.mu.RUnlock()
		return m.applied == a.im.Version
	}
	workers := min(openWorkers(), len(a.remove))
	jobs := make(chan kernel.TopicPartition)
	var wg sync.WaitGroup
	var mu sync.Mutex
	whole := true
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tp := range jobs {
				p, ok := m.removeIfCurrent(tp, a.im.Version)
				if !ok {
					mu.Lock()
					whole = false
					mu.Unlock()
					continue
				}
				if p != nil {
					mu.Lock()
					a.touched = append(a.touched, p)
					mu.Unlock()
				}
			}
		}()
	}
	for _, tp := range a.remove {
		jobs <- tp
	}
	close(jobs)
	wg.Wait()
	return whole
}

// removeIfCurrent drops tp's local partition (and forgets a failed open of it),
// unless an image newer than version was acted on (false). It returns the dropped
// partition (nil: none).
func (m *Module) removeIfCurrent(tp kernel.TopicPartition, version uint64) (*Partition, bool) {
	l := m.openLock(tp)
	l.Lock()
	defer l.Unlock()
	m.mu.Lock()
	if m.applied != version || m.parts == nil {
		m.mu.Unlock()
		return nil, false
	}
	p := m.parts[tp]
	delete(m.parts, tp)
	_, failed := m.failed[tp]
	delete(m.failed, tp)
	m.mu.Unlock()
	switch {
	case p != nil:
		m.drop(p)
	case failed:
		// Its directory may be there (a failed open may have created it).
		if err := m.storage.Remove(tp); err != nil {
			m.logOpen("remove partition", tp, err)
		}
	}
	return p, true
}

// refollow makes the fetchers follow what the partitions ps (touched by an apply,
// dropped or not) now need. Called from the subscription goroutine only, so
// assignments are made in image order.
func (m *Module) refollow(ps []*Partition) {
	if len(ps) == 0 {
		return
	}
	var changes []followChange
	m.mu.RLock()
	for _, p := range ps {
		cur := m.follows[p.tp]
		var want *follow
		if m.parts[p.tp] == p {
			want = m.followOf(p)
		} else if cur == nil || cur.p != p {
			continue // p is not the partition followed under its name
		}
		if cur == nil && want == nil || cur != nil && want != nil && cur.p == want.p && cur.leader == want.leader && cur.epoch == want.epoch {
			continue
		}
		changes = append(changes, followChange{tp: p.tp, old: cur, new: want})
		if want == nil {
			delete(m.follows, p.tp)
		} else {
			m.follows[p.tp] = want
		}
	}
	m.mu.RUnlock()
	m.fetchers.apply(changes, m.followN)
}

// refollowAll makes the fetchers follow every local partition that this broker
// replicates and does not lead, from its current leader (none while it is offline),
// sharded by the current num.replica.fetchers.
func (m *Module) refollowAll() {
	want := map[kernel.TopicPartition]*follow{}
	m.mu.RLock()
	for tp, p := range m.parts {
		if f := m.followOf(p); f != nil {
			want[tp] = f
		}
	}
	m.mu.RUnlock()
	n := m.rcfg.Load().fetchers
	m.mu.Lock()
	m.follows = maps.Clone(want)
	m.followN = n
	m.mu.Unlock()
	m.fetchers.assign(want, n)
}

// followOf is what the fetchers must do for local partition p: follow its leader
// when this broker replicates it and does not lead it (nil: nothing, also while it
// has no leader).
func (m *Module) followOf(p *Partition) *follow {
	pl := p.place.Load()
	if pl.leader >= 0 && pl.leader != m.broker.NodeID && slices.Contains(pl.replicas, m.broker.NodeID) {
		return &follow{p: p, leader: pl.leader, epoch: pl.epoch}
	}
	return nil
}

// followChange is one partition's change of follow (old or new nil: none).
type followChange struct {
	tp       kernel.TopicPartition
	old, new *follow
}

// hasLocal reports whether tp has a local partition or a failed open.
func (m *Module) hasLocal(tp kernel.TopicPartition) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.parts[tp] != nil || m.failed[tp] != nil
}

// openFailed reports whether tp's log failed to open (requests on it answer
// KAFKA_STORAGE_ERROR).
func (m *Module) openFailed(tp kernel.TopicPartition) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.failed[tp] != nil
}

// absentCode answers a request for a partition partition() did not return:
// KAFKA_STORAGE_ERROR when its log failed to open, else notHostedCode's.
func (m *Module) absentCode(im *kernel.Image, tp kernel.TopicPartition) int16 {
	if m.openFailed(tp) {
		return kerr.KafkaStorageError.Code
	}
	return notHostedCode(im, tp)
}

// openFailedErr records that opening tp (of incarnation id) failed with err and logs
// it when the failure is new or its error changed.
func (m *Module) openFailedErr(tp kernel.TopicPartition, id [16]byte, err error) {
	now := m.now()
	m.mu.Lock()
	if m.parts == nil {
		m.mu.Unlock()
		return
	}
	if m.failed == nil {
		m.failed = map[kernel.TopicPartition]*openFailure{}
	}
	f := m.failed[tp]
	changed := f == nil || f.id != id || f.err.Error() != err.Error()
	if f == nil || f.id != id {
		f = &openFailure{id: id, backoff: openRetryMin}
		m.failed[tp] = f
	} else {
		f.backoff = min(2*f.backoff, openRetryMax)
	}
	f.err, f.next = err, now.Add(f.backoff)
	m.mu.Unlock()
	if changed {
		m.logOpen("open partition", tp, err)
	}
	select {
	case m.retryWake <- struct{}{}:
	default:
	}
}

// openSucceeded forgets a failed open of tp, logging the recovery.
func (m *Module) openSucceeded(tp kernel.TopicPartition) {
	m.mu.Lock()
	f := m.failed[tp]
	delete(m.failed, tp)
	m.mu.Unlock()
	if f == nil {
		return
	}
	if ok, dropped := m.openLog.Allow(m.now()); ok {
		m.log.Info("partition opened after failure", "topic", tp.Topic, "partition", tp.Partition, "suppressed", dropped)
	}
}

// logOpen logs an open or removal error, at most openLogBurst lines per
// openLogEvery (the rest are counted into the next line), so thousands of
// partitions failing at once (EMFILE) do not flood the log.
func (m *Module) logOpen(msg string, tp kernel.TopicPartition, err error) {
	if errors.Is(err, errStopped) {
		return
	}
	if ok, dropped := m.openLog.Allow(m.now()); ok {
		m.log.Error(msg, "topic", tp.Topic, "partition", tp.Partition, "err", err, "suppressed", dropped)
	}
}

const (
	openLogBurst = 10
	openLogEvery = 10 * time.Second
)

// retryLoop reopens partitions whose open failed, each when its backoff is due, from
// the current image (as a lazy open does).
func (m *Module) retryLoop(ctx context.Context) {
	for {
		m.mu.Lock()
		idle := len(m.failed) == 0
		m.mu.Unlock()
		if idle { // nothing to retry: wait for a failure (and read no clock before)
			select {
			case <-m.retryWake:
			case <-ctx.Done():
				return
			}
			continue
		}
		var due []kernel.TopicPartition
		now := m.now()
		next := time.Duration(-1)
		m.mu.Lock()
		for tp, f := range m.failed {
			if d := f.next.Sub(now); d <= 0 {
				// Not due again before its backoff, whatever the attempt does (the
				// image may no longer host it until our apply of that image).
				f.next = now.Add(f.backoff)
				due = append(due, tp)
			} else if next < 0 || d < next {
				next = d
			}
		}
		m.mu.Unlock()
		for _, tp := range due {
			if ctx.Err() != nil {
				return
			}
			m.openFromImage(tp, true)
		}
		if len(due) > 0 {
			continue
		}
		var timer <-chan time.Time
		var t *time.Timer
		if next >= 0 {
			t = time.NewTimer(next)
			timer = t.C
		}
		select {
		case <-ctx.Done():
		case <-m.retryWake:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// openFromImage opens tp from the current image, outside the subscription (a request
// for a topic the subscription has not delivered yet, or the retry of a failed open:
// retry). nil when the image has no such partition on this node, or when its open
// failed (and, unless retry, is not due again).
func (m *Module) openFromImage(tp kernel.TopicPartition, retry bool) *Partition {
	im := m.meta.Image()
	pi := im.Partition(tp.Topic, tp.Partition)
	if pi == nil || !m.hosts(pi) {
		return nil
	}
	t := im.Topic(tp.Topic)
	m.mu.Lock()
	if m.stopping || m.parts == nil {
		m.mu.Unlock()
		return nil
	}
	if f := m.failed[tp]; f != nil && f.id == t.ID && !retry {
		m.mu.Unlock()
		return nil // KAFKA_STORAGE_ERROR until the retry
	}
	// Images older than this one must no longer remove what we open now.
	m.applied = max(m.applied, im.Version)
	m.mu.Unlock()
	m.noteAdhoc(tp, im.Version)
	cfg := kconfig.ResolveTopic(t.Configs, m.brokerConfigs(im))
	p, err := m.open(tp, t.ID, im.Version, pi, &cfg)
	if err != nil {
		return nil
	}
	if p.update(im.Version, pi, &cfg, m.now().UnixMilli()) {
		p.changed()
	}
	return p
}

// topicName is the name of whichever of a and b is not nil.
func topicName(a, b *kernel.TopicImage) string {
	if a != nil {
		return a.Name
	}
	return b.Name
}
