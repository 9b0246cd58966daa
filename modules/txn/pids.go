package txn

import (
	"context"
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/kernel"
)

// pidBlockSize is how many producer ids one allocation reserves (Kafka's brokers ask
// the controller for blocks of 1000).
const pidBlockSize = 1000

// pidBlocks hands out producer ids from blocks reserved through the metadata log.
//
// Invariant: an id is handed out at most once. Blocks never overlap or repeat
// (kernel.ProducerIDAllocator), the ids of a block are handed out in order under mu,
// and a block is dropped, never reused, once used up or when this broker restarts (the
// unused rest of it is lost, as in Kafka).
type pidBlocks struct {
	alloc kernel.ProducerIDAllocator

	mu         sync.Mutex
	next, end  int64 // [next, end) is what is left of the current block
	allocCalls int
}

// nextID returns a fresh producer id, reserving a new block when the current one is
// used up. Concurrent callers wait for one allocation.
func (p *pidBlocks) nextID(ctx context.Context) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end {
		first, err := p.alloc.AllocateProducerIDs(ctx, pidBlockSize)
		if err != nil {
			return -1, fmt.Errorf("txn: reserve producer ids: %w", err)
		}
		if first < 0 {
			return -1, fmt.Errorf("txn: reserve producer ids: negative first id %d", first)
		}
		p.next, p.end = first, first+pidBlockSize
		p.allocCalls++
	}
	id := p.next
	p.next++
	return id, nil
}
