package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"
)

const consumeUsage = `usage: sluice consume TOPIC [flags]

  -n N                  stop after N records (default: run until interrupted)
  -o, --offset WHERE    start, end, an offset, -N (the last N of each partition),
                        @UNIX_MILLISECONDS or an RFC 3339 time
                        (default start; with --group, only where the group has no offset)
  --from-beginning      the same as -o start
  -e, --exit-at-end     stop at the end of every partition (as it was when starting)
  -p, --partition N     read only partition N
  -g, --group GROUP     consume as a member of GROUP, committing its offsets
  -f, --format FORMAT   how to print each record (default "%v\n"):
                        %t topic, %p partition, %o offset, %k key, %v value,
                        %T timestamp (unix ms), %h headers (k=v,...), \n, \t, %%
  --json                one JSON object per record and line instead of --format

` + kafkaHelp

func consumeCmd(args []string, stdout, stderr io.Writer) int {
	return exitCode(stderr, "sluice consume", consumeRun(args, stdout, stderr))
}

func consumeRun(args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet("sluice consume", consumeUsage, stderr)
	var where, group, format string
	n := fs.Int("n", 0, "stop after N records (0: no limit)")
	fs.StringVar(&where, "offset", "start", "start, end, OFFSET, -N, @UNIX_MILLISECONDS or RFC 3339 time")
	fs.StringVar(&where, "o", "start", "shorthand for --offset")
	fromBeginning := fs.Bool("from-beginning", false, "the same as -o start")
	var exitAtEnd bool
	fs.BoolVar(&exitAtEnd, "exit-at-end", false, "stop at the end of every partition")
	fs.BoolVar(&exitAtEnd, "e", false, "shorthand for --exit-at-end")
	partition := fs.Int("partition", -1, "read only this partition")
	fs.IntVar(partition, "p", -1, "shorthand for --partition")
	fs.StringVar(&group, "group", "", "consume as a member of GROUP")
	fs.StringVar(&group, "g", "", "shorthand for --group")
	fs.StringVar(&format, "format", `%v\n`, "record format")
	fs.StringVar(&format, "f", `%v\n`, "shorthand for --format")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos, 1, 1, "topic"); err != nil {
		return err
	}
	topic := pos[0]
	if *fromBeginning {
		where = "start"
	}
	spec, err := parseOffsetSpec(where)
	if err != nil {
		return err
	}
	if *n < 0 {
		return usageError{"-n must be 0 (no limit) or more"}
	}
	fm, err := compileFormat(format)
	if err != nil {
		return err
	}
	if group != "" && (*partition >= 0 || exitAtEnd) {
		return usageError{"--group does not go with --partition or --exit-at-end"}
	}
	var off kgo.Offset
	switch spec.kind {
	case "start":
		off = kgo.NewOffset().AtStart()
	case "end":
		off = kgo.NewOffset().AtEnd()
	case "offset":
		off = kgo.NewOffset().At(spec.offset)
	case "fromEnd":
		off = kgo.NewOffset().AtEnd().Relative(-spec.offset)
	case "time":
		off = kgo.NewOffset().AfterMilli(spec.millis)
	}
	opts := []kgo.Opt{kgo.FetchMaxWait(500 * time.Millisecond)}
	if exitAtEnd {
		// Transaction markers take offsets too, and the end may be just past one:
		// they come through (and are not printed) so that the end is seen.
		opts = append(opts, kgo.KeepControlRecords())
	}
	switch {
	case group != "":
		opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(off))
	case *partition >= 0:
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {int32(*partition): off}}))
	default:
		opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(off))
	}
	if exitAtEnd && spec.kind == "end" {
		return nil // nothing before the end to read
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cl, err := kf.client(ctx, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	// With --exit-at-end: each partition's end offset now, and the next offset to read
	// (a partition whose start is at its end is done at once).
	var ends, next map[int32]int64
	if exitAtEnd {
		lctx, cancel := context.WithTimeout(ctx, kf.timeout)
		ends, next, err = readBounds(lctx, kadm.NewClient(cl), topic, int32(*partition), spec)
		cancel()
		if err != nil {
			return err
		}
	}
	// reached reports whether every partition is at its end.
	reached := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}

	got := 0
	tty := isTerminal(stderr)
	lastProgress := time.Now()
	var buf []byte
	for {
		if exitAtEnd && reached() {
			break
		}
		if *n > 0 && got >= *n {
			break
		}
		fetches := cl.PollRecords(ctx, max(*n-got, 0))
		if ctx.Err() != nil {
			break
		}
		var fetchErr error
		fetches.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			fmt.Fprintf(stderr, "sluice consume: %s[%d]: %v\n", t, p, err)
			fetchErr = err
		})
		if fetchErr != nil && fetches.NumRecords() == 0 && isFatalFetch(fetchErr) {
			return fetchErr
		}
		for _, r := range fetches.Records() {
			if *n > 0 && got >= *n {
				break
			}
			if exitAtEnd && r.Offset >= ends[r.Partition] {
				next[r.Partition] = max(next[r.Partition], ends[r.Partition])
				continue
			}
			if r.Attrs.IsControl() {
				next[r.Partition] = r.Offset + 1
				continue
			}
			buf = buf[:0]
			if kf.json {
				buf = appendRecordJSON(buf, r)
			} else {
				buf = fm.append(buf, r)
			}
			if _, err := stdout.Write(buf); err != nil {
				return err
			}
			got++
			if exitAtEnd {
				next[r.Partition] = r.Offset + 1
			}
		}
		if tty {
			if now := time.Now(); now.Sub(lastProgress) >= progressEvery {
				lastProgress = now
				fmt.Fprintf(stderr, "\rconsumed %d records", got)
			}
		}
	}
	if group != "" {
		cctx, cancel := context.WithTimeout(context.Background(), kf.timeout)
		defer cancel()
		if err := cl.CommitUncommittedOffsets(cctx); err != nil {
			return fmt.Errorf("committing the group's offsets: %w", err)
		}
	}
	if tty {
		fmt.Fprintf(stderr, "\rconsumed %d records\n", got)
	}
	return nil
}

// readBounds lists, for topic's partitions (only partition when >= 0), the end
// offset and the offset spec starts reading at (the end when no record is at or after
// a time).
func readBounds(ctx context.Context, adm *kadm.Client, topic string, partition int32, spec offsetSpec) (ends, starts map[int32]int64, err error) {
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, nil, err
	}
	ends = map[int32]int64{}
	listed.Each(func(lo kadm.ListedOffset) {
		if partition < 0 || lo.Partition == partition {
			ends[lo.Partition] = lo.Offset
		}
	})
	if len(ends) == 0 {
		return nil, nil, fmt.Errorf("topic %s has no partition %d", topic, partition)
	}
	from, err := spec.resolve(ctx, adm, []string{topic})
	if err != nil {
		return nil, nil, err
	}
	starts = map[int32]int64{}
	from.Each(func(lo kadm.ListedOffset) {
		if end, ok := ends[lo.Partition]; ok {
			if lo.Offset < 0 {
				lo.Offset = end
			}
			starts[lo.Partition] = lo.Offset
		}
	})
	return ends, starts, nil
}

// isFatalFetch reports whether a fetch error means reading cannot go on (an unknown
// topic or missing rights), not a hiccup the client retries.
func isFatalFetch(err error) bool {
	var ke interface{ IsRetriable() bool }
	if errors.As(err, &ke) {
		return !ke.IsRetriable()
	}
	return false
}

// isTerminal reports whether w is a terminal (progress lines go only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// recordFormat is a compiled --format: literal text and record fields in order.
type recordFormat struct{ parts []formatPart }

type formatPart struct {
	lit   string
	field byte // 0: lit
}

func compileFormat(s string) (recordFormat, error) {
	var f recordFormat
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			f.parts = append(f.parts, formatPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case '\\':
				lit.WriteByte('\\')
			default:
				return f, usageError{fmt.Sprintf("--format: unknown escape \\%c", s[i])}
			}
		case c == '%' && i+1 < len(s):
			i++
			switch s[i] {
			case '%':
				lit.WriteByte('%')
			case 't', 'p', 'o', 'k', 'v', 'T', 'h':
				flush()
				f.parts = append(f.parts, formatPart{field: s[i]})
			default:
				return f, usageError{fmt.Sprintf("--format: unknown field %%%c (want %%t %%p %%o %%k %%v %%T %%h)", s[i])}
			}
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return f, nil
}

func (f recordFormat) append(b []byte, r *kgo.Record) []byte {
	for _, p := range f.parts {
		switch p.field {
		case 0:
			b = append(b, p.lit...)
		case 't':
			b = append(b, r.Topic...)
		case 'p':
			b = strconv.AppendInt(b, int64(r.Partition), 10)
		case 'o':
			b = strconv.AppendInt(b, r.Offset, 10)
		case 'k':
			b = append(b, r.Key...)
		case 'v':
			b = append(b, r.Value...)
		case 'T':
			b = strconv.AppendInt(b, r.Timestamp.UnixMilli(), 10)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, h.Key...)
				b = append(b, '=')
				b = append(b, h.Value...)
			}
		}
	}
	return b
}

// recordJSON is --json's line per record. Keys, values and header values are strings
// when they are valid UTF-8; otherwise the *_base64 field holds them.
type recordJSON struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	Offset      int64        `json:"offset"`
	Timestamp   int64        `json:"timestamp"`
	Key         *string      `json:"key"`
	KeyBase64   []byte       `json:"key_base64,omitempty"`
	Value       *string      `json:"value"`
	ValueBase64 []byte       `json:"value_base64,omitempty"`
	Headers     []headerJSON `json:"headers,omitempty"`
}

type headerJSON struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func appendRecordJSON(b []byte, r *kgo.Record) []byte {
	rj := recordJSON{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli()}
	text := func(v []byte, s **string, raw *[]byte) {
		switch {
		case v == nil:
		case utf8.Valid(v):
			str := string(v)
			*s = &str
		default:
			*raw = v
		}
	}
	text(r.Key, &rj.Key, &rj.KeyBase64)
	text(r.Value, &rj.Value, &rj.ValueBase64)
	for _, h := range r.Headers {
		rj.Headers = append(rj.Headers, headerJSON{Key: h.Key, Value: string(h.Value)})
	}
	out, err := json.Marshal(rj)
	if err != nil {
		return b
	}
	return append(append(b, out...), '\n')
}
