package kernel

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzReadFrame feeds arbitrary bytes to the framer: it must never panic, never return
// a frame longer than the limit, and never allocate more than it has read (plus a step).
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 3, 1, 2, 3})
	f.Add([]byte{0, 0, 0, 3, 1, 2, 3, 0, 0, 0, 1, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for {
			buf, err := ReadFrame(r, nil, 1<<16, nil)
			if err != nil {
				return
			}
			if len(buf) > 1<<16 {
				t.Fatalf("frame of %d bytes over the limit", len(buf))
			}
		}
	})
}

// FuzzDecodeRequest runs the whole request decode path (header prefix, header rest,
// body) for arbitrary payloads: errors are fine, panics are not (decodeBody recovers
// kmsg panics, which the fuzzer would still report as a failure of the recover).
func FuzzDecodeRequest(f *testing.F) {
	seed := func(r kmsg.Request, v int16) {
		r.SetVersion(v)
		b := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz")).AppendRequest(nil, r, 1)
		f.Add(b[4:])
	}
	f.Add([]byte{})
	f.Add([]byte{0, 18, 0})
	seed(kmsg.NewPtrApiVersionsRequest(), 3)
	seed(kmsg.NewPtrMetadataRequest(), 12)
	p := kmsg.NewPtrProduceRequest()
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = bytes.Repeat([]byte{1}, 70)
	pt.Partitions = append(pt.Partitions, pp)
	p.Topics = append(p.Topics, pt)
	seed(p, 9)
	seed(kmsg.NewPtrFetchRequest(), 13)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHeaderPrefix(b)
		if err != nil {
			return
		}
		body := kmsg.RequestForKey(h.key)
		if body == nil || h.version < 0 || h.version > body.MaxVersion() {
			return
		}
		body.SetVersion(h.version)
		rest, err := parseHeaderRest(&h, b, body.IsFlexible())
		if err != nil {
			return
		}
		if len(rest) > len(b) {
			t.Fatal("body longer than the frame")
		}
		_ = decodeBody(body, rest)
	})
}

func TestSkipTags(t *testing.T) {
	b := []byte{2, 1, 2, 0xaa, 0xbb, 5, 0, 0xcc}
	rest, err := skipTags(b)
	if err != nil || !bytes.Equal(rest, []byte{0xcc}) {
		t.Fatalf("rest %x err %v", rest, err)
	}
	if _, err := skipTags([]byte{1, 1, 9}); err == nil {
		t.Fatal("tag size past the end accepted")
	}
	big := binary.AppendUvarint(nil, 1<<40)
	if _, err := skipTags(big); err == nil {
		t.Fatal("huge tag count accepted")
	}
}
