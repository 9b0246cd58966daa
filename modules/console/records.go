package console

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/kernel"
)

// Bounds of a records page.
const (
	defaultLimit    = 20
	maxLimit        = 100
	defaultMaxBytes = 256 << 10
	maxMaxBytes     = 1 << 20
	// maxField is where a key, value or header value is cut in an answer.
	maxField = 16 << 10
)

type headerJSON struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Encoding string `json:"encoding"`
}

type recordJSON struct {
	Partition     int32        `json:"partition"`
	Offset        int64        `json:"offset"`
	Timestamp     int64        `json:"timestamp"`
	Key           *string      `json:"key"`
	KeyEncoding   string       `json:"key_encoding,omitempty"`
	Value         *string      `json:"value"`
	ValueEncoding string       `json:"value_encoding,omitempty"`
	Headers       []headerJSON `json:"headers"`
	Truncated     bool         `json:"truncated,omitempty"`
}

type recordsJSON struct {
	Topic      string       `json:"topic"`
	Partition  int32        `json:"partition"`
	From       int64        `json:"from"`
	NextOffset int64        `json:"next_offset"`
	EndOffset  int64        `json:"end_offset"`
	Records    []recordJSON `json:"records"`
}

// intParam reads query parameter name as an integer in [lo, hi], def when absent.
func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, badRequest{name + ": not an integer: " + strconv.Quote(s)}
	}
	if v < lo || v > hi {
		return 0, badRequest{name + " " + s + ": want " + strconv.FormatInt(lo, 10) + " to " + strconv.FormatInt(hi, 10)}
	}
	return v, nil
}

// records reads a page of a partition's records, at an offset (default: the page
// before the end) or at the first record at or after a timestamp.
func (m *Module) records(ctx context.Context, r *http.Request) (any, error) {
	topic := r.PathValue("topic")
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "partition", "offset", "timestamp", "limit", "max_bytes":
		default:
			return nil, badRequest{"unknown parameter " + strconv.Quote(k) + " (partition, offset, timestamp, limit, max_bytes)"}
		}
	}
	part, err := intParam(r, "partition", 0, 0, 1<<31-1)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", defaultLimit, 1, maxLimit)
	if err != nil {
		return nil, err
	}
	maxBytes, err := intParam(r, "max_bytes", defaultMaxBytes, 1, maxMaxBytes)
	if err != nil {
		return nil, err
	}
	offset, err := intParam(r, "offset", -1, 0, 1<<62)
	if err != nil {
		return nil, err
	}
	ts, err := intParam(r, "timestamp", -1, 0, 1<<62)
	if err != nil {
		return nil, err
	}
	if offset >= 0 && ts >= 0 {
		return nil, badRequest{"give offset or timestamp, not both"}
	}
	p, _ := kernel.AdminPrincipal(r)
	if !m.authz.Authorize(ctx, p, remoteHost(r.RemoteAddr), kernel.OpRead, kernel.Resource{Type: kernel.ResTopic, Name: topic}) {
		return nil, forbidden{p.String() + " may not read topic " + topic + " (it needs Read on the topic)"}
	}
	adm, cl, err := m.client()
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	end, ok := ends.Lookup(topic, int32(part))
	if !ok {
		return nil, notFound{"no partition " + strconv.FormatInt(part, 10) + " of topic " + topic}
	}
	if end.Err != nil {
		return nil, end.Err
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	start, _ := starts.Lookup(topic, int32(part))
	from := offset
	switch {
	case ts >= 0:
		at, err := adm.ListOffsetsAfterMilli(ctx, ts, topic)
		if err != nil {
			return nil, err
		}
		o, _ := at.Lookup(topic, int32(part))
		from = o.Offset
		if o.Err != nil || from < 0 {
			from = end.Offset
		}
	case from < 0:
		from = max(end.Offset-limit, start.Offset)
	}
	from = max(from, start.Offset)
	out := recordsJSON{Topic: topic, Partition: int32(part), From: from, NextOffset: from, EndOffset: end.Offset, Records: []recordJSON{}}
	if from >= end.Offset {
		return out, nil
	}
	// A consumer of this one partition from from: the cluster client's connections,
	// its own fetch session, closed when the page is read.
	cons, err := kgo.NewClient(append(cl.Opts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {int32(part): kgo.NewOffset().At(from)}}),
		kgo.FetchMaxBytes(int32(maxBytes)), kgo.FetchMaxPartitionBytes(int32(maxBytes)),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.ClientID("sluice-console-records"))...)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	bytes := int64(0)
	for int64(len(out.Records)) < limit && out.NextOffset < end.Offset && bytes < maxBytes {
		fs := cons.PollRecords(ctx, int(limit)-len(out.Records))
		if err := ctx.Err(); err != nil {
			break
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return nil, errs[0].Err
		}
		for _, rec := range fs.Records() {
			if int64(len(out.Records)) >= limit || bytes >= maxBytes {
				break
			}
			rj := recordJSON{Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp.UnixMilli(), Headers: []headerJSON{}}
			if rec.Key != nil {
				s, enc, cut := encode(rec.Key)
				rj.Key, rj.KeyEncoding, rj.Truncated = &s, enc, cut
			}
			if rec.Value != nil {
				s, enc, cut := encode(rec.Value)
				rj.Value, rj.ValueEncoding, rj.Truncated = &s, enc, rj.Truncated || cut
			}
			for _, h := range rec.Headers {
				s, enc, cut := encode(h.Value)
				rj.Headers = append(rj.Headers, headerJSON{Key: h.Key, Value: s, Encoding: enc})
				rj.Truncated = rj.Truncated || cut
			}
			bytes += int64(len(rec.Key) + len(rec.Value))
			out.Records = append(out.Records, rj)
			out.NextOffset = rec.Offset + 1
		}
	}
	return out, nil
}

// isText reports whether b is UTF-8 without control characters other than tab and
// line breaks (what the page can show as text).
func isText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// remoteHost is the IP address of a request's peer, as ACLs name hosts.
func remoteHost(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}
