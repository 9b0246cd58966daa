// Command redpanda-uppercase is a transform written with Redpanda's Go
// transform SDK (not sluice's): it upper-cases record values. Sluice runs
// modules built against Redpanda's ABI as well as its own.
package main

import (
	"bytes"

	"github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"
)

func main() {
	transform.OnRecordWritten(uppercase)
}

// uppercase writes the record with its value upper-cased; the key and
// headers are kept.
func uppercase(e transform.WriteEvent, w transform.RecordWriter) error {
	r := e.Record()
	return w.Write(transform.Record{
		Key:     r.Key,
		Value:   upper(r.Value),
		Headers: r.Headers,
	})
}

// upper upper-cases a value (UTF-8 aware); a null value stays null.
func upper(v []byte) []byte {
	if v == nil {
		return nil
	}
	return bytes.ToUpper(v)
}
