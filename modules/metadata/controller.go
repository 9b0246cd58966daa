package metadata

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// newUUID returns 16 random bytes that are neither all zero nor Kafka's reserved
// metadata topic id (0...01), and whose base64 form does not start with '-' (Kafka's
// command-line tools would take it for a flag).
func (nd *node) newUUID() (image.UUID, error) {
	var u image.UUID
	for {
		if _, err := io.ReadFull(nd.rand, u[:]); err != nil {
			return u, fmt.Errorf("random id: %w", err)
		}
		if u != (image.UUID{}) && u != (image.UUID{15: 1}) && base64.RawURLEncoding.EncodeToString(u[:1])[0] != '-' {
			return u, nil
		}
	}
}

// randIntn returns a random int in [0, n), n > 0.
func (nd *node) randIntn(n int) (int, error) {
	var b [8]byte
	if _, err := io.ReadFull(nd.rand, b[:]); err != nil {
		return 0, fmt.Errorf("random: %w", err)
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return int(v % uint64(n)), nil
}

// proposeAll appends records to the metadata log (packed into batch entries, see
// packEntries) and waits until each is applied to this broker's image. errs[i] is nil
// when records[i] was applied and accepted; otherwise it is ErrNotController, a ctx
// error, or the reason Apply rejected it.
// On success the returned image includes every accepted record.
func (nd *node) proposeAll(ctx context.Context, recs []image.Record) (*kernel.Image, []error) {
	im, _, errs := nd.proposeAllResults(ctx, recs)
	return im, errs
}

// proposeAllResults is proposeAll that also returns each record's apply result (its
// raft future's response; zero when errs[i] is not nil). What an entry produced that
// the image does not show (the first id of a ProducerIDs block) is read from there.
//
// On the controller (the raft leader) it proposes the records itself; elsewhere it
// forwards them to the controller (forward.go) and waits until this broker's image
// has the last one applied, so the caller reads its own writes either way.
func (nd *node) proposeAllResults(ctx context.Context, recs []image.Record) (*kernel.Image, []image.ApplyResult, []error) {
	if r := nd.raft.Load(); r != nil && r.State() != raft.Leader && nd.networked() {
		return nd.forwardAll(ctx, recs)
	}
	return nd.proposeLocal(ctx, recs)
}

// proposeLocal proposes records on this broker, which must be the raft leader
// (ErrNotController otherwise).
func (nd *node) proposeLocal(ctx context.Context, recs []image.Record) (*kernel.Image, []image.ApplyResult, []error) {
	errs := make([]error, len(recs))
	results := make([]image.ApplyResult, len(recs))
	fail := func(err error) (*kernel.Image, []image.ApplyResult, []error) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
				results[i] = image.ApplyResult{}
			}
		}
		return nd.hub.image(), results, errs
	}
	r := nd.raft.Load()
	if r == nil {
		return fail(ErrNotRunning)
	}
	if r.State() != raft.Leader {
		return fail(ErrNotController)
	}
	var timeout time.Duration
	if d, ok := ctx.Deadline(); ok {
		if timeout = time.Until(d); timeout <= 0 {
			return fail(context.DeadlineExceeded)
		}
	}
	entries := packEntries(recs, errs)
	futures := make([]raft.ApplyFuture, len(entries))
	began := time.Now()
	for i, e := range entries {
		futures[i] = r.Apply(e.data, timeout)
	}
	if nd.commitTime != nil {
		defer func() { nd.commitTime.Observe(time.Since(began).Seconds()) }()
	}
	var last uint64
	wake := false
	for k, f := range futures {
		e := entries[k]
		if err := nd.await(ctx, f); err != nil {
			for _, i := range e.recs {
				errs[i] = mapRaftErr(err)
			}
			continue
		}
		res, _ := f.Response().(image.ApplyResult)
		last = max(last, f.Index())
		recResults := []image.ApplyResult{res}
		if e.batch {
			recResults = res.Batch
		}
		if len(recResults) != len(e.recs) { // cannot happen: the entry is this code's
			for _, i := range e.recs {
				errs[i] = fmt.Errorf("entry %d: %d results for %d records: %w", f.Index(), len(recResults), len(e.recs), image.ErrInvalidEntry)
			}
			continue
		}
		for j, i := range e.recs {
			res := recResults[j]
			if errs[i] = res.Err; res.Err != nil {
				continue
			}
			results[i] = res
			nd.logApplied(recs[i], f.Index())
			if pc, ok := recs[i].(*image.PartitionChangeRecord); ok && pc.Validate {
				wake = true
			}
		}
	}
	if wake {
		// An ISR change or a new reassignment may let the controller complete a
		// reassignment: look now rather than at the next tick.
		nd.wakeController()
	}
	// FSM.Apply publishes before raft resolves the future, so this returns at once;
	// it is the check that the caller's image holds what it proposed.
	if err := nd.hub.waitFor(ctx, func(im *kernel.Image) bool { return im.Version >= last }); err != nil {
		return fail(err)
	}
	return nd.hub.image(), results, errs
}

// maxBatchBytes bounds one batch entry (image.BatchRecord): the records of one
// proposal are packed into as few entries as this allows, a record larger than it
// going alone. So one CreateTopics of 10,000 topics (~1.5 MB of records) is two raft
// appends and two new images rather than 10,000 of each, while one entry stays small
// next to the RPC frame bound (64 MiB) and a follower's AppendEntries of up to 64
// entries.
const maxBatchBytes = 1 << 20

// entry is one raft entry of a proposal: a record, or a batch of them (batch), and
// the positions of its records in the proposal.
type entry struct {
	data  []byte
	batch bool
	recs  []int
}

// packEntries encodes recs into entries in order: consecutive records share a batch
// entry up to maxBatchBytes; a lone record is written as itself, so a proposal of one
// record is the entry it always was. A record that does not encode gets its error in
// errs and no entry.
func packEntries(recs []image.Record, errs []error) []entry {
	var out []entry
	var group [][]byte
	var at []int
	size := 0
	flush := func() {
		switch len(group) {
		case 0:
			return
		case 1:
			out = append(out, entry{data: group[0], recs: at})
		default:
			out = append(out, entry{data: image.EncodeBatch(group), batch: true, recs: at})
		}
		group, at, size = nil, nil, 0
	}
	for i, rec := range recs {
		if _, nested := rec.(*image.BatchRecord); nested {
			errs[i] = fmt.Errorf("propose a batch record: %w", image.ErrInvalidEntry)
			continue
		}
		data, err := image.EncodeRecord(rec)
		if err != nil {
			errs[i] = err
			continue
		}
		if size+4+len(data) > maxBatchBytes {
			flush()
		}
		group = append(group, data)
		at = append(at, i)
		size += 4 + len(data)
	}
	flush()
	return out
}

// propose is proposeAll for one record.
func (nd *node) propose(ctx context.Context, rec image.Record) (*kernel.Image, error) {
	im, errs := nd.proposeAll(ctx, []image.Record{rec})
	return im, errs[0]
}

func mapRaftErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: %v", ErrNotController, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %v", ErrNotRunning, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
	}
	return err
}

// await waits for a raft future or ctx. The waiting goroutine is tracked: raft resolves
// every future by the time Shutdown returns, and Stop waits for it.
func (nd *node) await(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	if !nd.goTracked(func() { done <- f.Error() }) {
		return ErrNotRunning
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leaderLoop does the controller's one-off duties each time this node becomes the raft
// leader: set the cluster id on a new log and record itself as controller.
//
// Once the duties are done it runs controllerLoop (fencing, elections) until leadership
// is lost; each new term starts with fresh broker sessions.
func (c *controller) leaderLoop(ctx context.Context, r *raft.Raft) {
	stopCtl := func() {}
	defer func() { stopCtl() }()
	for {
		select {
		case <-ctx.Done():
			return
		case leader := <-r.LeaderCh():
			stopCtl()
			stopCtl = func() {}
			if leader && c.becomeController(ctx, r) {
				c.reset()
				cctx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				if c.goTracked(func() { defer close(done); c.controllerLoop(cctx, r) }) {
					stopCtl = func() { cancel(); <-done }
				} else {
					cancel()
				}
			}
		}
	}
}

// becomeController does the new controller's one-off duties; false when leadership was
// lost (or the module stops) first.
func (c *controller) becomeController(ctx context.Context, r *raft.Raft) bool {
	term := r.CurrentTerm()
	for backoff := 10 * time.Millisecond; ctx.Err() == nil && r.State() == raft.Leader; backoff = min(2*backoff, time.Second) {
		err := c.controllerDuties(ctx, r, term)
		if err == nil {
			c.log.Info("became controller", "term", term)
			return true
		}
		c.log.Warn("controller setup failed; retrying", "err", err, "term", term)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
	return false
}

func (c *controller) controllerDuties(ctx context.Context, r *raft.Raft, term uint64) error {
	// The barrier returns once everything before it is applied, so the image is
	// complete before we look at it.
	if err := c.await(ctx, r.Barrier(0)); err != nil {
		return fmt.Errorf("barrier: %w", mapRaftErr(err))
	}
	if c.hub.image().ClusterID == "" {
		id := c.kctx.Broker().ClusterID
		if id == "" {
			u, err := c.newUUID()
			if err != nil {
				return err
			}
			id = u.String()
		}
		if _, err := c.propose(ctx, &image.ClusterIDRecord{ClusterID: id}); err != nil && !errors.Is(err, image.ErrClusterIDSet) {
			return fmt.Errorf("set cluster id: %w", err)
		}
	}
	if _, err := c.propose(ctx, &image.LeaderChangeRecord{NodeID: c.nodeID, Term: term}); err != nil {
		return fmt.Errorf("record leader change: %w", err)
	}
	return c.bootstrapFeatures(ctx)
}

// logApplied notes an admin change this broker proposed. Config values are left out:
// some are secrets.
func (nd *node) logApplied(rec image.Record, index uint64) {
	switch r := rec.(type) {
	case *image.CreateTopicRecord:
		nd.log.Info("created topic", "topic", r.Name, "topic_id", r.ID.String(), "partitions", len(r.Partitions), "index", index)
	case *image.DeleteTopicRecord:
		nd.log.Info("deleted topic", "topic", r.Name, "topic_id", r.ID.String(), "index", index)
	case *image.CreatePartitionsRecord:
		nd.log.Info("added partitions", "topic", r.Topic, "from", r.From, "to", int(r.From)+len(r.Partitions), "index", index)
	case *image.AlterTopicConfigsRecord:
		nd.log.Info("altered topic configs", "topic", r.Topic, "set", slices.Sorted(maps.Keys(r.Set)), "deleted", r.Delete, "replace", r.Replace, "index", index)
	case *image.AlterBrokerConfigsRecord:
		nd.log.Info("altered broker configs", "node", r.Node, "set", slices.Sorted(maps.Keys(r.Set)), "deleted", r.Delete, "replace", r.Replace, "index", index)
	default:
		if nd.log.Enabled(context.Background(), slog.LevelDebug) {
			nd.log.Debug("applied metadata entry", "type", fmt.Sprintf("%T", rec), "index", index)
		}
	}
}
