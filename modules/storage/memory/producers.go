package memory

import (
	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/producers"
)

// AppendProducer implements kernel.Log: the sequence check and the append happen under
// the partition lock, so a retry racing its original sees it either appended or not.
func (l *Log) AppendProducer(batch []byte, seq kernel.SeqRange) (kernel.AppendResult, error) {
	if len(batch) > 0 {
		return l.append(batch, producers.Client, &seq)
	}
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.closed.Load() {
		return kernel.AppendResult{}, kernel.ErrLogClosed
	}
	return p.prod.RecordEmpty(seq, p.leo(), p.logStart, p.now().UnixMilli())
}

// Producer implements kernel.Log.
func (l *Log) Producer(id int64) (kernel.ProducerState, bool) {
	l.p.mu.RLock()
	defer l.p.mu.RUnlock()
	return l.p.prod.Producer(id)
}

// FirstUnstableOffset implements kernel.Log.
func (l *Log) FirstUnstableOffset() (int64, bool) {
	l.p.mu.RLock()
	defer l.p.mu.RUnlock()
	return l.p.prod.FirstUnstableOffset()
}

// AbortedTxns implements kernel.Log.
func (l *Log) AbortedTxns(dst []kernel.AbortedTxn, from, to int64) []kernel.AbortedTxn {
	l.p.mu.RLock()
	defer l.p.mu.RUnlock()
	return l.p.prod.AbortedTxns(dst, from, to)
}

// Producers implements kernel.Log.
func (l *Log) Producers() []kernel.ProducerState {
	l.p.mu.RLock()
	defer l.p.mu.RUnlock()
	return l.p.prod.Producers()
}

// rebuildProducers recomputes the producer state from the batches (after Truncate).
// Sequence ranges of empty AppendProducer calls are lost, as after a crash of a
// persistent log. mu held.
func (p *partition) rebuildProducers() {
	p.prod.Reset()
	for _, s := range p.segs {
		for j, bp := range s.batches {
			end := len(s.data)
			if j+1 < len(s.batches) {
				end = s.batches[j+1].pos
			}
			b := s.data[bp.pos:end]
			h, err := recordbatch.ParseHeader(b)
			if err != nil {
				continue // appended after validation: cannot happen
			}
			pb, err := producers.FromHeader(&h, b, bp.appendMs)
			if err != nil {
				continue
			}
			p.prod.Apply(pb)
		}
	}
	p.prod.TruncateHead(p.logStart)
}
