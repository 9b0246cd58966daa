package transforms

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// Exactly-once derived transforms: Kafka Streams' exactly-once inside the broker. A
// worker is a transactional producer (id TxnIDPrefix+"<name>-<partition>") and keeps
// its input position as the committed offset of its input partition in the internal
// group GroupPrefix+"<name>". Each run of input batches is one transaction holding the
// run's outputs (one transactional batch per output partition) and the new position
// (TxnOffsetCommit), so the outputs and the position commit or abort together.

// TxnIDPrefix and GroupPrefix name an exactly-once derived transform's transactional
// ids (+"<name>-<partition>") and its position group (+"<name>").
const (
	TxnIDPrefix = "__sluice-transform-"
	GroupPrefix = "__sluice-transform-"
)

// eosAPIs are the txn and groups modules' internal APIs; both nil when either module
// does not offer them (derived transforms are then at least once).
type eosAPIs struct {
	txns kernel.InternalTxns
	offs kernel.InternalOffsets
}

// lookupEOS finds the internal transaction and offset APIs (optional: a broker
// without the txn or groups module runs derived transforms at least once).
func lookupEOS(ctx kernel.Context) eosAPIs {
	txns, err1 := kernel.LookupAs[kernel.InternalTxns](ctx, "txn")
	offs, err2 := kernel.LookupAs[kernel.InternalOffsets](ctx, "groups")
	if err1 != nil || err2 != nil {
		return eosAPIs{}
	}
	return eosAPIs{txns: txns, offs: offs}
}

func (e eosAPIs) enabled() bool { return e.txns != nil && e.offs != nil }

const (
	// eosTxnTimeoutMs is the workers' transaction timeout: a worker that stops
	// answering (a hung broker, not a crash: a restart fences at once) has its
	// transaction aborted by the coordinator after it.
	eosTxnTimeoutMs = 60_000
	// runMaxTime and runMaxBytes bound one transaction's run of input batches.
	runMaxTime  = time.Second
	runMaxBytes = 1 << 20
	// eosMaxBackoff caps the wait between failed attempts.
	eosMaxBackoff = 10 * time.Second
	// stuckWarnAfter turns a lasting coordinator wait into a warning.
	stuckWarnAfter = 30 * time.Second
	// briefRetry bounds retryBriefly.
	briefRetry = 5 * time.Second
)

// errRunFull stops a read when the run reached its bounds.
var errRunFull = errors.New("transaction run full")

func (d *derived) txnID(p int32) string {
	return TxnIDPrefix + d.t.dep.Name + "-" + strconv.Itoa(int(p))
}
func (d *derived) group() string { return GroupPrefix + d.t.dep.Name }

// retriable reports whether err is a coordinator state that passes by itself: a fenced
// transaction still aborting, a partition loading or moving, a pending offset commit.
func retriable(err error) bool {
	return errors.Is(err, kerr.ConcurrentTransactions) || errors.Is(err, kerr.CoordinatorLoadInProgress) ||
		errors.Is(err, kerr.CoordinatorNotAvailable) || errors.Is(err, kernel.ErrNotCoordinator) ||
		errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.UnstableOffsetCommit) ||
		errors.Is(err, kernel.ErrNotLeader)
}

// retryBriefly runs op again while it fails with a retriable error, for up to
// briefRetry: the previous transaction's markers (CONCURRENT_TRANSACTIONS, pending
// offsets) usually take milliseconds, not worth a new session.
func retryBriefly(ctx context.Context, op func() error) error {
	deadline := time.Now().Add(briefRetry)
	wait := 10 * time.Millisecond
	for {
		err := op()
		if err == nil || !retriable(err) || errors.Is(err, kernel.ErrNotLeader) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// workEOS is the exactly-once worker of input partition p. Each session (see
// session) starts with InitProducerID, which fences any previous worker of p (on this
// broker or the previous leader) and aborts its open transaction; any failure ends
// the session and the next one starts from the committed position after a backoff.
func (d *derived) workEOS(ctx context.Context, p int32) {
	defer d.wg.Done()
	log := d.t.m.log.With("transform", d.t.dep.Name, "partition", p, "transactional_id", d.txnID(p))
	backoff := pollInterval
	var waitingSince time.Time // first retriable failure in a row
	for ctx.Err() == nil {
		progressed, err := d.session(ctx, p)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			backoff = pollInterval
		}
		if err == nil || !retriable(err) || progressed {
			waitingSince = time.Time{}
		}
		switch {
		case err == nil:
		case retriable(err):
			if waitingSince.IsZero() {
				waitingSince = time.Now()
			}
			// Passing states (markers, loads) are debug; one that lasts (e.g. the
			// transactional id coordinated by another broker) is a warning.
			level := slog.LevelDebug
			if time.Since(waitingSince) > stuckWarnAfter {
				level = slog.LevelWarn
			}
			log.Log(ctx, level, "exactly-once derived transform waiting for its coordinators", "err", err,
				"waiting", time.Since(waitingSince).Round(time.Second), "retry_in", backoff)
		default:
			log.Warn("exactly-once derived transform stalled; retrying from its committed position", "err", err, "retry_in", backoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, eosMaxBackoff)
	}
}

// session runs one producer session of partition p's worker until an error or ctx
// ends. progressed reports whether it committed at least one transaction.
func (d *derived) session(ctx context.Context, p int32) (progressed bool, err error) {
	t := d.t
	eos := t.m.eos
	id, group := d.txnID(p), d.group()
	tp := kernel.TopicPartition{Topic: t.dep.Input, Partition: p}
	var pe kernel.ProducerIDEpoch
	err = retryBriefly(ctx, func() (err error) { pe, err = eos.txns.InitProducerID(ctx, id, eosTxnTimeoutMs); return err })
	if err != nil {
		return false, fmt.Errorf("init producer id: %w", err)
	}
	pos, err := d.committedPosition(ctx, p)
	if err != nil {
		return false, err
	}
	d.setPosition(p, pos)
	t.m.log.Debug("exactly-once derived transform session", "transform", t.dep.Name, "partition", p,
		"producer_id", pe.ID, "producer_epoch", pe.Epoch, "position", pos)
	r := &eosRun{d: d, tp: tp, pe: pe, id: id}
	for ctx.Err() == nil {
		next, err := r.fill(ctx, pos)
		if err == nil && next > pos {
			err = r.commit(ctx, group, next)
		}
		if err != nil {
			r.abort(err)
			return progressed, err
		}
		if next > pos {
			pos, progressed = next, true
			d.setPosition(p, pos)
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollInterval):
		}
	}
	return progressed, nil
}

// committedPosition is p's committed position: the group offset, else (a transform
// that ran at least once before) the legacy stored position, else 0 (ReadStable
// starts at the log start).
func (d *derived) committedPosition(ctx context.Context, p int32) (int64, error) {
	tp := kernel.TopicPartition{Topic: d.t.dep.Input, Partition: p}
	var offs map[kernel.TopicPartition]int64
	err := retryBriefly(ctx, func() (err error) {
		offs, err = d.t.m.eos.offs.StableOffsets(ctx, d.group(), []kernel.TopicPartition{tp})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("committed position: %w", err)
	}
	if off, ok := offs[tp]; ok && off >= 0 {
		return off, nil
	}
	if v := d.t.m.meta.Image().Extension(PositionNamespace, d.posKey(p)); len(v) == 8 {
		return int64(binary.BigEndian.Uint64(v)), nil
	}
	return 0, nil
}

// eosRun is one session's transaction state.
type eosRun struct {
	d     *derived
	tp    kernel.TopicPartition
	pe    kernel.ProducerIDEpoch
	id    string
	open  bool                           // a transaction is open (something was added to it)
	added map[kernel.TopicPartition]bool // partitions in the open transaction
	dec   recordbatch.Decoder
	outs  map[kernel.TopicPartition]*runOutput
	order []kernel.TopicPartition
}

// runOutput is what a run writes to one output partition: its records with
// timestamps as deltas from base, in input order.
type runOutput struct {
	codec int
	base  int64
	recs  []recordbatch.Record
}

// fill transforms the input batches from pos (a run bounded by runMaxTime and
// runMaxBytes) and appends their outputs in the open transaction, one transactional
// batch per output partition. It returns the position after the run (pos when there
// was nothing to read). Batches a policy dropped or dead-lettered advance the
// position like transformed ones.
func (r *eosRun) fill(ctx context.Context, pos int64) (int64, error) {
	d := r.d
	start, size := time.Now(), 0
	next := pos
	clear(r.outs)
	r.order = r.order[:0]
	if r.outs == nil {
		r.outs = map[kernel.TopicPartition]*runOutput{}
	}
	im := d.t.m.meta.Image()
	end, err := d.t.m.parts.ReadStable(ctx, r.tp, pos, func(batch []byte) error {
		if size > 0 && (size >= runMaxBytes || time.Since(start) >= runMaxTime) {
			return errRunFull
		}
		r.dec.Compacted = true // the input may be a compacted topic
		h, sec, err := r.dec.Section(batch)
		if err != nil {
			return err
		}
		if h.LastOffset() < next {
			return nil
		}
		if !h.IsControl() { // ReadStable has none; kept for safety
			perOut, err := d.outputs(ctx, r.tp, h, sec, batch)
			if err != nil {
				if next > pos {
					// Commit the batches before the failed one first: the next
					// run starts at it (and fails there alone), so the position
					// and the lag show where the transform is stuck.
					return errRunFull
				}
				return err
			}
			for i, recs := range perOut {
				if len(recs) == 0 {
					continue
				}
				otp, err := d.outputPartition(im, i, r.tp.Partition)
				if err != nil {
					return err
				}
				o := r.outs[otp]
				if o == nil {
					o = &runOutput{codec: h.Codec(), base: h.BaseTimestamp}
					r.outs[otp] = o
					r.order = append(r.order, otp)
				}
				for _, rec := range recs {
					rec.TimestampDelta += h.BaseTimestamp - o.base
					o.recs = append(o.recs, rec)
				}
			}
		}
		size += len(batch)
		next = h.LastOffset() + 1
		return nil
	})
	if err != nil && !errors.Is(err, errRunFull) {
		return pos, err
	}
	if err == nil && end > next {
		// A complete read passes what ReadStable did not show (trailing markers,
		// aborted batches), so the committed position, and the group's lag, reach
		// the last stable offset.
		next = end
	}
	if next == pos {
		return pos, nil
	}
	var add []kernel.TopicPartition
	for _, otp := range r.order {
		if !r.added[otp] {
			add = append(add, otp)
		}
	}
	if len(add) > 0 {
		r.open = true
		if err := retryBriefly(ctx, func() error { return d.t.m.eos.txns.AddPartitionsToTxn(ctx, r.id, r.pe, add) }); err != nil {
			return pos, fmt.Errorf("add partitions to the transaction: %w", err)
		}
		if r.added == nil {
			r.added = map[kernel.TopicPartition]bool{}
		}
		for _, otp := range add {
			r.added[otp] = true
		}
	}
	for _, otp := range r.order {
		o := r.outs[otp]
		// Invariant: a coordinator write (producer id and epoch, base sequence -1) of
		// a partition added to the open transaction: epoch-checked, so a fenced
		// worker's batch is refused.
		out := recordbatch.Build(recordbatch.Options{
			Codec: o.codec, BaseTimestamp: o.base, Transactional: true,
			ProducerID: r.pe.ID, ProducerEpoch: r.pe.Epoch, BaseSequence: -1,
		}, o.recs...)
		if _, err := d.t.m.parts.Append(ctx, otp, out); err != nil {
			return pos, fmt.Errorf("append to %s/%d: %w", otp.Topic, otp.Partition, err)
		}
	}
	return next, nil
}

// commit adds the position group to the transaction, commits next as the input
// partition's offset in it and commits the transaction.
func (r *eosRun) commit(ctx context.Context, group string, next int64) error {
	eos := r.d.t.m.eos
	r.open = true
	if err := retryBriefly(ctx, func() error { return eos.txns.AddOffsetsToTxn(ctx, r.id, r.pe, group) }); err != nil {
		return fmt.Errorf("add offsets to the transaction: %w", err)
	}
	if err := eos.offs.TxnCommitOffsets(ctx, r.id, group, r.pe, map[kernel.TopicPartition]int64{r.tp: next}); err != nil {
		return fmt.Errorf("commit the position: %w", err)
	}
	if err := eos.txns.EndTxn(ctx, r.id, r.pe, true); err != nil {
		return fmt.Errorf("commit the transaction: %w", err)
	}
	r.open = false
	clear(r.added)
	return nil
}

// abort ends the open transaction, if any, after a failure, best effort: when it
// fails (fenced, coordinator gone) the next session's InitProducerID aborts it, or
// the coordinator does after eosTxnTimeoutMs.
func (r *eosRun) abort(cause error) {
	if !r.open {
		return
	}
	r.open = false
	clear(r.added)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.d.t.m.eos.txns.EndTxn(ctx, r.id, r.pe, false); err != nil {
		r.d.t.m.log.Debug("aborting a derived transform's transaction failed", "transform", r.d.t.dep.Name,
			"transactional_id", r.id, "cause", cause, "err", err)
	}
}
