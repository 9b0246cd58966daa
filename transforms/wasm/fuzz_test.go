package wasm

import (
	"bytes"
	"testing"
)

// FuzzOutputParsers feeds arbitrary guest output to the host's parsers: the output
// encoding of emit (ABI.md), a Redpanda write_record payload, and the records-section
// index of the Redpanda read path. A guest controls these bytes, so the parsers must
// never panic, and what they accept must stay within what was given.
func FuzzOutputParsers(f *testing.F) {
	// One valid entry: output 0, a record with key "k", value "v", one header h=x.
	rec := []byte{0x00, 0x00, 0x00, 0x02, 'k', 0x02, 'v', 0x02, 0x02, 'h', 0x02, 'x'}
	entry := append([]byte{0x00, byte(len(rec) << 1)}, rec...)
	f.Add(entry, uint8(1))
	f.Add(append(append([]byte{}, entry...), entry...), uint8(2))
	f.Add([]byte{0x01, 0x02, 0x00, 0x00}, uint8(1))             // index out of range
	f.Add([]byte{0x00, 0x7f}, uint8(1))                         // length past the end
	f.Add([]byte{0x00, 0xff, 0xff, 0xff, 0xff, 0x7f}, uint8(8)) // varint overflow
	f.Add([]byte{0x01, 0x01, 0x00}, uint8(3))                   // null key, value, no headers
	f.Fuzz(func(t *testing.T, b []byte, outputs uint8) {
		n := int(outputs%8) + 1
		var o outBuilder
		if errno := o.appendRecords(b, n); errno == 0 {
			outs, err := o.finish()
			if err != nil {
				t.Fatalf("accepted output, then finish failed: %v", err)
			}
			total := 0
			for _, out := range outs {
				if out.Index < 0 || out.Index >= n {
					t.Fatalf("output index %d of %d outputs", out.Index, n)
				}
				total += len(out.Key) + len(out.Value)
				for _, h := range out.Headers {
					total += len(h.Key) + len(h.Value)
				}
			}
			if total > len(b) {
				t.Fatalf("outputs hold %d bytes from %d bytes of input", total, len(b))
			}
		} else if _, err := o.finish(); err == nil {
			t.Fatalf("errno %d but finish reported no error", errno)
		}

		var p outBuilder
		if err := p.appendPayload(b, 0, 0); err == nil {
			outs, err := p.finish()
			if err != nil || len(outs) != 1 {
				t.Fatalf("payload accepted: %d outputs, %v", len(outs), err)
			}
			if len(outs[0].Key) > len(b) || len(outs[0].Value) > len(b) {
				t.Fatal("payload output larger than its input")
			}
			if outs[0].Key != nil && !bytes.Contains(b, outs[0].Key) {
				t.Fatal("key not taken from the payload")
			}
		}

		recs, maxPayload, err := parseRecords(b, nil)
		if err == nil {
			for _, r := range recs {
				if r.payload[0] < 0 || r.payload[0] > r.payload[1] || r.payload[1] > len(b) {
					t.Fatalf("payload [%d, %d) outside %d bytes", r.payload[0], r.payload[1], len(b))
				}
				if r.payload[1]-r.payload[0] > maxPayload {
					t.Fatalf("payload of %d bytes above the reported max %d", r.payload[1]-r.payload[0], maxPayload)
				}
			}
		}
	})
}
