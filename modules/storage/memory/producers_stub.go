package memory

import "github.com/sluicehq/sluice/kernel"

// Temporary: producer state lands with issue 6 (the storage helper replaces this file).

// AppendProducer appends without producer checks (placeholder).
func (l *Log) AppendProducer(batch []byte, _ kernel.SeqRange) (kernel.AppendResult, error) {
	return l.AppendLeader(batch)
}

// FirstUnstableOffset reports no open transaction (placeholder).
func (l *Log) FirstUnstableOffset() (int64, bool) { return 0, false }

// AbortedTxns reports none (placeholder).
func (l *Log) AbortedTxns(dst []kernel.AbortedTxn, _, _ int64) []kernel.AbortedTxn { return dst }

// Producers reports none (placeholder).
func (l *Log) Producers() []kernel.ProducerState { return nil }

// Producer reports none (placeholder).
func (l *Log) Producer(int64) (kernel.ProducerState, bool) { return kernel.ProducerState{}, false }
