package recordbatch_test

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/recordbatch"
)

func Example() {
	batch := recordbatch.Build(recordbatch.Options{
		Codec:         recordbatch.CodecZstd,
		BaseTimestamp: 1000,
		ProducerID:    recordbatch.NoProducerID,
	},
		recordbatch.Record{Key: []byte("k1"), Value: []byte("hello")},
		recordbatch.Record{TimestampDelta: 5, Value: []byte("world"),
			Headers: []recordbatch.RecordHeader{{Key: []byte("trace"), Value: []byte("1")}}},
	)

	in, err := recordbatch.Validate(batch)
	fmt.Println(in.Records, in.MinTimestamp, in.MaxTimestamp, err)

	var d recordbatch.Decoder
	_, err = d.Records(batch, func(r *recordbatch.Record) error {
		fmt.Printf("%d %q %q %d headers\n", r.Offset, r.Key, r.Value, len(r.Headers))
		return nil
	})
	fmt.Println(err)

	batch[len(batch)-1] ^= 1
	_, err = recordbatch.Validate(batch)
	fmt.Println(errors.Is(err, recordbatch.ErrCorrupt), errors.Is(err, recordbatch.ErrCRC))
	// Output:
	// 2 1000 1005 <nil>
	// 0 "k1" "hello" 0 headers
	// 1 "" "world" 1 headers
	// <nil>
	// true true
}
