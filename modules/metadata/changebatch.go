package metadata

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// maxChangesPerProposal bounds the PartitionChange records of one coalesced proposal
// (about 100 bytes each in JSON: well inside one forwarded frame, a few batch entries).
const maxChangesPerProposal = 4096

// changeProposalTimeout bounds one coalesced proposal when no caller has a deadline,
// and caps the one taken from the callers' deadlines.
const changeProposalTimeout = 30 * time.Second

// changeBatcher coalesces the records of concurrent AlterPartition calls into one
// proposal, as Kafka's AlterPartitionManager sends one AlterPartition request for all
// pending ISR changes. Without it a broker catching up on 100,000 partitions sent one
// forwarded RPC (each on its own connection past rpcMaxIdle) and one raft entry per
// partition, which kept a 2-core, 3-broker cluster too busy to keep its raft leader.
//
// At most one proposal is in flight per broker: the first caller of an idle batcher
// starts a tracked sender goroutine, which takes everything queued (up to
// maxChangesPerProposal), proposes it, answers each caller with its own record's
// outcome and goes on until the queue is empty. Callers that gave up (ctx done) are
// left out of the next proposal; a record already sent for one may still apply, which
// AlterPartition's callers allow (the partition epoch fences a repeat).
type changeBatcher struct {
	mu      sync.Mutex
	queue   []*pendingChange
	sending bool // a sender goroutine owns the queue's draining
}

// pendingChange is one caller's record and, once done is closed, its outcome.
type pendingChange struct {
	ctx  context.Context
	rec  image.Record
	done chan struct{}
	im   *kernel.Image // the image after the proposal (every accepted record applied)
	err  error
}

// propose proposes rec with whatever other callers queue meanwhile and waits for its
// outcome: proposeAll's image and rec's error, or ctx's error.
func (b *changeBatcher) propose(ctx context.Context, nd *node, rec image.Record) (*kernel.Image, error) {
	pc := &pendingChange{ctx: ctx, rec: rec, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, pc)
	start := !b.sending
	b.sending = true
	b.mu.Unlock()
	if start && !nd.goTracked(func() { b.send(nd) }) {
		b.failAll(ErrNotRunning)
	}
	select {
	case <-pc.done:
		return pc.im, pc.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// failAll answers every queued caller with err and leaves the batcher idle.
func (b *changeBatcher) failAll(err error) {
	b.mu.Lock()
	q := b.queue
	b.queue, b.sending = nil, false
	b.mu.Unlock()
	for _, pc := range q {
		pc.err = err
		close(pc.done)
	}
}

// send drains the queue, one proposal at a time, until it is empty.
func (b *changeBatcher) send(nd *node) {
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxChangesPerProposal)
		if n == 0 {
			b.queue, b.sending = nil, false
			b.mu.Unlock()
			return
		}
		batch := make([]*pendingChange, 0, n)
		batch = append(batch, b.queue[:n]...)
		b.queue = append(b.queue[:0:0], b.queue[n:]...)
		b.mu.Unlock()

		live := batch[:0]
		var deadline time.Time
		for _, pc := range batch {
			if err := pc.ctx.Err(); err != nil {
				pc.err = err
				close(pc.done)
				continue
			}
			live = append(live, pc)
			if d, ok := pc.ctx.Deadline(); ok && d.After(deadline) {
				deadline = d
			}
		}
		if len(live) == 0 {
			continue
		}
		timeout := changeProposalTimeout
		if !deadline.IsZero() {
			timeout = min(time.Until(deadline), timeout)
		}
		recs := make([]image.Record, len(live))
		for i, pc := range live {
			recs[i] = pc.rec
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		im, errs := nd.proposeAll(ctx, recs)
		cancel()
		for i, pc := range live {
			pc.im, pc.err = im, errs[i]
			close(pc.done)
		}
	}
}
