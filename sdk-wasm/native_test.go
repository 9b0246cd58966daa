//go:build !wasip1

package sdk

import "testing"

func TestNativeOnRecordPanics(t *testing.T) {
	expectPanic(t, "OnRecord", func() { OnRecord(func(Record, Writer) error { return nil }) })
	expectPanic(t, "OnBatch", func() { OnBatch(func(*Batch, Writer) error { return nil }) })
}
