// rpupper upper-cases values with Redpanda's transform SDK.
package main

import (
	"bytes"

	"github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"
)

func main() {
	transform.OnRecordWritten(func(e transform.WriteEvent, w transform.RecordWriter) error {
		r := e.Record()
		r.Value = bytes.ToUpper(r.Value)
		return w.Write(r)
	})
}
