// rptopic writes each record to the default output and, with its offset and
// timestamp as headers, to the second output topic, with Redpanda's transform
// SDK. It also checks that the schema registry is reported unavailable.
package main

import (
	"os"
	"strconv"

	"github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"
	"github.com/redpanda-data/redpanda/src/transform-sdk/go/transform/sr"
)

func main() {
	c := sr.NewClient()
	if _, err := c.LookupSchemaById(1); err == nil {
		panic("schema registry lookup succeeded")
	}
	second := os.Getenv("REDPANDA_OUTPUT_TOPIC_1")
	transform.OnRecordWritten(func(e transform.WriteEvent, w transform.RecordWriter) error {
		r := e.Record()
		if err := w.Write(r); err != nil {
			return err
		}
		r.Headers = append(r.Headers,
			transform.RecordHeader{Key: []byte("offset"), Value: []byte(strconv.FormatInt(r.Offset, 10))},
			transform.RecordHeader{Key: []byte("ts"), Value: []byte(strconv.FormatInt(r.Timestamp.UnixMilli(), 10))},
		)
		return w.Write(r, transform.ToTopic(second))
	})
}
