package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// Shard is one partition of the topic this broker leads, at one leader epoch: its
// load, its writer and its State. A module's shard type embeds it. tp, epoch, ctx
// and state never change after creation.
type Shard struct {
	c      *core
	tp     kernel.TopicPartition
	epoch  int32
	ctx    context.Context // cancelled when the shard is unloaded
	cancel context.CancelFunc
	state  State

	load   Load          // ends when the replay does
	writes chan *Pending // to the writer
	wake   chan struct{} // capacity 1: Waker.Woken is due
	// done is closed when the shard has stopped writing: its load failed or its
	// writer exited. The next shard of the partition replays only after it.
	done chan struct{}
	prev *Shard // the shard this one replaced; the loader's until its done

	unloadOnce sync.Once
}

// core is the part of Shards a Shard uses; it does not depend on the state type.
type core struct {
	cfg  *Config
	wg   *sync.WaitGroup
	drop func(*Shard, *kerr.Error)
}

func (c *Shards[S]) newShard(tp kernel.TopicPartition, epoch int32, prev *Shard) *Shard {
	ctx, cancel := context.WithCancel(context.Background())
	sh := &Shard{
		c:  c.core,
		tp: tp, epoch: epoch,
		ctx: ctx, cancel: cancel,
		load:   NewLoad(),
		writes: make(chan *Pending, writeQueue),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		prev:   prev,
	}
	sh.state = c.newState(sh)
	return sh
}

// TP is the shard's partition.
func (sh *Shard) TP() kernel.TopicPartition { return sh.tp }

// Epoch is the leader epoch the shard coordinates at.
func (sh *Shard) Epoch() int32 { return sh.epoch }

// Context ends when the shard is unloaded.
func (sh *Shard) Context() context.Context { return sh.ctx }

// Loading is the shard's load.
func (sh *Shard) Loading() *Load { return &sh.load }

// Drop removes the shard from the map (if it is still its partition's) and unloads
// it with code: after a failure that needs a reload, so the next lookup replays the
// log and the state never disagrees with it.
func (sh *Shard) Drop(code *kerr.Error) { sh.c.drop(sh, code) }

// Wake has the writer call the state's Woken (Waker) between writes. It never blocks.
func (sh *Shard) Wake() {
	select {
	case sh.wake <- struct{}{}:
	default:
	}
}

func (sh *Shard) unload(code *kerr.Error) {
	sh.unloadOnce.Do(func() {
		sh.cancel()
		sh.state.Unload(code)
	})
}

// run loads the shard, then runs its writer. It owns one wg count.
func (sh *Shard) run() {
	defer sh.c.wg.Done()
	defer close(sh.done)
	if sh.prev != nil {
		select {
		case <-sh.prev.done:
		case <-sh.ctx.Done():
		}
		sh.prev = nil
	}
	cfg := sh.c.cfg
	start := time.Now()
	from := sh.state.ReplayFrom()
	n, err := sh.replay(from)
	if err == nil && sh.ctx.Err() != nil {
		err = sh.ctx.Err()
	}
	var attrs []any
	if err == nil {
		attrs, err = sh.state.Loaded()
	}
	if err != nil {
		sh.load.Done(err)
		if !errors.Is(err, context.Canceled) {
			cfg.Log.Warn("loading "+cfg.Topic+" partition failed", "partition", sh.tp.Partition, "err", err)
		}
		return
	}
	sh.load.Done(nil)
	args := append([]any{"partition", sh.tp.Partition, "leader_epoch", sh.epoch,
		"replayed_records", n, "from_offset", from}, attrs...)
	// A shard with nothing to replay is news to nobody: the first group use of a
	// broker loads 50 of them at once, one Info line each was noise.
	took := time.Since(start)
	lvl := slog.LevelInfo
	if n == 0 && took < time.Second {
		lvl = slog.LevelDebug
	}
	cfg.Log.Log(sh.ctx, lvl, "coordinating "+cfg.Topic+" partition", append(args, "took", took)...)
	sh.writer()
}

// replay hands every committed batch of the partition from offset from to the state,
// and returns how many records it handed over.
func (sh *Shard) replay(from int64) (int, error) {
	d := recordbatch.Decoder{Compacted: true} // the internal topics are compacted
	var recs []Record
	n := 0
	err := sh.c.cfg.Parts.ReadCommitted(sh.ctx, sh.tp, from, func(raw []byte) error {
		h, err := recordbatch.ParseHeader(raw)
		if err != nil {
			return err
		}
		b := Batch{Header: h, Raw: raw}
		if !h.IsControl() {
			recs = recs[:0]
			_, err = d.Records(raw, func(r *recordbatch.Record) error {
				if off := h.BaseOffset + int64(r.OffsetDelta); off >= from {
					recs = append(recs, Record{Offset: off, Key: r.Key, Value: r.Value})
				}
				return nil
			})
			if err != nil {
				return err
			}
			n += len(recs)
			b.Records = recs
		}
		return sh.state.Replay(b)
	})
	return n, err
}

// Pending is a queued write.
type Pending struct {
	sh       *Shard
	recs     []KV
	producer *Producer
	done     chan *kerr.Error // buffered 1
}

// Enqueue queues recs to the writer, which appends queued writes in queue order,
// gathering them into batches. Wait gets the outcome.
func (sh *Shard) Enqueue(ctx context.Context, recs []KV) (*Pending, *kerr.Error) {
	return sh.enqueue(ctx, &Pending{sh: sh, recs: recs, done: make(chan *kerr.Error, 1)})
}

// EnqueueTxn queues recs as one transactional batch of producer p, appended alone.
func (sh *Shard) EnqueueTxn(ctx context.Context, p Producer, recs []KV) (*Pending, *kerr.Error) {
	return sh.enqueue(ctx, &Pending{sh: sh, recs: recs, producer: &p, done: make(chan *kerr.Error, 1)})
}

func (sh *Shard) enqueue(ctx context.Context, w *Pending) (*Pending, *kerr.Error) {
	select {
	case sh.writes <- w:
		return w, nil
	case <-sh.ctx.Done():
		return nil, kerr.NotCoordinator
	case <-ctx.Done():
		return nil, kerr.RequestTimedOut
	}
}

// Wait waits for the write's outcome: nil once its batch is committed and the state
// has it, NOT_COORDINATOR if the writer exited first, REQUEST_TIMED_OUT if ctx ends
// first (the write may still happen).
func (w *Pending) Wait(ctx context.Context) *kerr.Error {
	select {
	case code := <-w.done:
		return code
	case <-w.sh.done:
		// The writer exited; it may have answered w just before.
		select {
		case code := <-w.done:
			return code
		default:
			return kerr.NotCoordinator
		}
	case <-ctx.Done():
		return kerr.RequestTimedOut
	}
}

// Write queues recs and waits for the outcome (Enqueue, Wait).
func (sh *Shard) Write(ctx context.Context, recs []KV) *kerr.Error {
	if len(recs) == 0 {
		return nil
	}
	w, e := sh.Enqueue(ctx, recs)
	if e != nil {
		return e
	}
	return w.Wait(ctx)
}

// WriteTxn queues recs as producer p's transactional batch and waits (EnqueueTxn,
// Wait). Producer-state refusals (INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE,
// TRANSACTION_COORDINATOR_FENCED) are answered without dropping the shard.
func (sh *Shard) WriteTxn(ctx context.Context, p Producer, recs []KV) *kerr.Error {
	if len(recs) == 0 {
		return nil
	}
	w, e := sh.EnqueueTxn(ctx, p, recs)
	if e != nil {
		return e
	}
	return w.Wait(ctx)
}

// writer appends queued writes to the partition in batches until the shard's ctx
// ends; a transactional write is appended alone.
func (sh *Shard) writer() {
	maxRecs := sh.c.cfg.MaxBatchRecords
	var batch []*Pending
	var carry *Pending // a transactional write met while gathering: the next append
	b, _ := recordbatch.NewBuilder(recordbatch.Options{})
	for {
		w := carry
		carry = nil
		if w == nil {
			select {
			case <-sh.ctx.Done():
				sh.failQueued()
				return
			case <-sh.wake:
				if wk, ok := sh.state.(Waker); ok {
					wk.Woken()
				}
				continue
			case w = <-sh.writes:
			}
		}
		if w.producer != nil {
			w.done <- sh.flush(b, []*Pending{w}, w.producer)
			continue
		}
		batch = append(batch[:0], w)
		n := len(w.recs)
	more:
		for n < maxRecs {
			select {
			case w := <-sh.writes:
				if w.producer != nil {
					carry = w
					break more
				}
				batch = append(batch, w)
				n += len(w.recs)
			default:
				break more
			}
		}
		code := sh.flush(b, batch, nil)
		for _, w := range batch {
			w.done <- code
		}
		if carry != nil && sh.ctx.Err() != nil {
			carry.done <- kerr.NotCoordinator
			carry = nil
		}
	}
}

func (sh *Shard) failQueued() {
	for {
		select {
		case w := <-sh.writes:
			w.done <- kerr.NotCoordinator
		default:
			return
		}
	}
}

// flush appends the records of ws as one batch (of producer p, transactional, if p
// is set), waits for it to commit and hands it to the state. It returns the code
// every write gets.
func (sh *Shard) flush(b *recordbatch.Builder, ws []*Pending, p *Producer) *kerr.Error {
	cfg := sh.c.cfg
	opts := recordbatch.Options{BaseTimestamp: cfg.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if p != nil {
		opts.Transactional, opts.ProducerID, opts.ProducerEpoch = true, p.ID, p.Epoch
	}
	if err := b.Reset(opts); err != nil {
		return kerr.UnknownServerError
	}
	var recs []Record
	for _, w := range ws {
		for _, r := range w.recs {
			b.Add(&recordbatch.Record{Key: r.Key, Value: r.Value})
			recs = append(recs, Record{Key: r.Key, Value: r.Value})
		}
	}
	if len(recs) == 0 {
		return nil
	}
	raw, err := b.AppendTo(nil)
	if err != nil {
		return kerr.UnknownServerError
	}
	res, err := cfg.Parts.Append(sh.ctx, sh.tp, raw)
	if err != nil {
		return sh.appendFailed(err, len(recs), p)
	}
	for i := range recs {
		recs[i].Offset = res.BaseOffset + int64(i)
	}
	if err := sh.state.Appended(recs, p); err != nil {
		cfg.Log.Error("applying committed "+cfg.Topic+" records failed; reloading the partition",
			"partition", sh.tp.Partition, "err", err)
		sh.Drop(kerr.NotCoordinator)
	}
	return nil
}

// appendFailed maps a failed append to the code its writes get. A producer-state
// refusal leaves the shard loaded; anything else drops it (the append may or may
// not have happened: the reload finds out).
func (sh *Shard) appendFailed(err error, records int, p *Producer) *kerr.Error {
	if p != nil {
		switch {
		case errors.Is(err, kernel.ErrInvalidProducerEpoch):
			return kerr.InvalidProducerEpoch
		case errors.Is(err, kernel.ErrInvalidTxnState):
			return kerr.InvalidTxnState
		case errors.Is(err, kernel.ErrTxnCoordinatorFenced):
			return kerr.TransactionCoordinatorFenced
		}
	}
	code := kerr.CoordinatorNotAvailable
	if errors.Is(err, kernel.ErrNotLeader) || sh.ctx.Err() != nil {
		code = kerr.NotCoordinator
	}
	if sh.ctx.Err() == nil {
		cfg := sh.c.cfg
		args := []any{"partition", sh.tp.Partition, "records", records, "err", err}
		if p != nil {
			args = append(args, "producer_id", p.ID)
		}
		cfg.Log.Warn("appending to "+cfg.Topic+" failed; reloading the partition", args...)
	}
	sh.Drop(code)
	return code
}
