package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// usageError is a flag error: the command prints it (unless the flag package already
// did) and exits 2.
type usageError struct {
	msg     string
	printed bool
}

func (e *usageError) Error() string { return e.msg }

func usageErr(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// Limits that make a flag nonsense rather than merely slow.
const (
	maxRecordSize = 64 << 20 // a record bigger than this is not a benchmark of a broker
	maxClients    = 256      // producers or group members
	maxPartitions = 100_000
	maxKeys       = 10_000_000
	defaultKeys   = 1 << 14
)

// common are the flags every subcommand takes.
type common struct {
	brokers     []string
	topic       string
	partitions  int
	rf          int
	duration    time.Duration
	records     int64
	brokerPID   int
	progress    time.Duration
	timeout     time.Duration
	clientID    string
	noCreate    bool
	topicConfig map[string]*string // --topic-config, for the topic's creation
	durationSet bool
	recordsSet  bool
	sec         securityFlags
}

func (c *common) register(fs *flag.FlagSet) (brokers *string) {
	brokers = fs.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers host:port")
	fs.StringVar(&c.topic, "topic", "sluice-bench", "topic (created if missing)")
	fs.IntVar(&c.partitions, "partitions", 6, "partitions of the topic when it is created")
	fs.IntVar(&c.rf, "replication-factor", 1, "replication factor of the topic when it is created (-1: the broker's default)")
	fs.DurationVar(&c.duration, "duration", 0, "run for this long")
	fs.Int64Var(&c.records, "records", 0, "stop after this many records")
	fs.IntVar(&c.brokerPID, "broker-pid", 0, "PID of the broker process (same machine): report its CPU seconds and peak RSS from /proc")
	fs.DurationVar(&c.progress, "progress", 5*time.Second, "progress line on stderr every this often (0: none)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "give up (exit 1) after this long in all")
	fs.StringVar(&c.clientID, "client-id", "sluice-bench", "client.id of every client")
	fs.BoolVar(&c.noCreate, "no-create", false, "do not create the topic (it must exist)")
	c.sec.register(fs)
	fs.Func("topic-config", "`KEY=VALUE`: a config of the topic when it is created, e.g. cleanup.policy=compact (repeatable)", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return errors.New("want KEY=VALUE")
		}
		if c.topicConfig == nil {
			c.topicConfig = map[string]*string{}
		}
		c.topicConfig[k] = &v
		return nil
	})
	return brokers
}

// finish validates the common flags after parsing.
func (c *common) finish(fs *flag.FlagSet, brokers string) error {
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q (flags come as --name value)", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "duration":
			c.durationSet = true
		case "records":
			c.recordsSet = true
		}
	})
	c.brokers = nil
	for b := range strings.SplitSeq(brokers, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		host, port, err := net.SplitHostPort(b)
		if err != nil || host == "" {
			return usageErr("--brokers %q: want host:port", b)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return usageErr("--brokers %q: port %q is not 1-65535", b, port)
		}
		c.brokers = append(c.brokers, b)
	}
	if len(c.brokers) == 0 {
		return usageErr("--brokers: need at least one host:port")
	}
	if c.topic == "" || len(c.topic) > 249 || strings.ContainsFunc(c.topic, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) || c.topic == "." || c.topic == ".." {
		return usageErr("--topic %q: a Kafka topic name is 1-249 of [a-zA-Z0-9._-]", c.topic)
	}
	if c.partitions < 1 || c.partitions > maxPartitions {
		return usageErr("--partitions %d: want 1-%d", c.partitions, maxPartitions)
	}
	if c.rf == 0 || c.rf < -1 || c.rf > 32767 {
		return usageErr("--replication-factor %d: want >= 1, or -1 for the broker's default", c.rf)
	}
	if c.durationSet && c.duration <= 0 {
		return usageErr("--duration %v: want > 0", c.duration)
	}
	if c.recordsSet && c.records <= 0 {
		return usageErr("--records %d: want > 0", c.records)
	}
	if c.brokerPID < 0 {
		return usageErr("--broker-pid %d: want a process id", c.brokerPID)
	}
	if c.progress < 0 {
		return usageErr("--progress %v: want >= 0", c.progress)
	}
	if c.timeout <= 0 {
		return usageErr("--timeout %v: want > 0", c.timeout)
	}
	return c.sec.finish()
}

// producerFlags are the flags of produce and e2e.
type producerFlags struct {
	recordSize  int
	keyed       bool
	acksName    string
	acks        kgo.Acks
	linger      time.Duration
	batchSize   int
	compression string
	codec       kgo.CompressionCodec
	idemName    string
	idempotent  bool
	maxBuffered int
	keys        int // distinct keys with --keyed
}

func (p *producerFlags) register(fs *flag.FlagSet, defaultLinger time.Duration) {
	fs.IntVar(&p.recordSize, "record-size", 100, "value bytes per record")
	fs.BoolVar(&p.keyed, "keyed", false, "give records keys (spread over partitions by hash) instead of none (sticky partitioning)")
	fs.StringVar(&p.acksName, "acks", "1", "0, 1 or all (-1)")
	fs.DurationVar(&p.linger, "linger", defaultLinger, "linger.ms: how long a partition's batch waits for more records")
	fs.IntVar(&p.batchSize, "batch-size", 1000012, "batch.size: most bytes in one record batch")
	fs.StringVar(&p.compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	fs.IntVar(&p.maxBuffered, "max-buffered-records", 10000, "most records a producer buffers unacknowledged (kgo's MaxBufferedRecords; Kafka's buffer.memory in records)")
	fs.StringVar(&p.idemName, "idempotence", "auto", "on, off, or auto (on with --acks all, off otherwise)")
	fs.IntVar(&p.keys, "keys", defaultKeys, "distinct keys with --keyed, used in turn")
}

func (p *producerFlags) finish(minRecordSize int) error {
	if p.recordSize < minRecordSize || p.recordSize > maxRecordSize {
		return usageErr("--record-size %d: want %d-%d bytes", p.recordSize, minRecordSize, maxRecordSize)
	}
	switch strings.ToLower(p.acksName) {
	case "0":
		p.acks = kgo.NoAck()
	case "1":
		p.acks = kgo.LeaderAck()
	case "all", "-1":
		p.acks = kgo.AllISRAcks()
		p.acksName = "all"
	default:
		return usageErr("--acks %q: want 0, 1 or all", p.acksName)
	}
	if p.linger < 0 {
		return usageErr("--linger %v: want >= 0", p.linger)
	}
	if p.keys < 1 || p.keys > maxKeys {
		return usageErr("--keys %d: want 1-%d", p.keys, maxKeys)
	}
	if p.maxBuffered < 1 || p.maxBuffered > 10_000_000 {
		return usageErr("--max-buffered-records %d: want 1-10000000", p.maxBuffered)
	}
	// A batch must hold at least one record: the value plus the key (8) and the
	// record's and the batch's framing (61 + ~20).
	if need := p.recordSize + 128; p.batchSize < need || p.batchSize > 1<<30 {
		return usageErr("--batch-size %d: want %d (one %d-byte record and its framing) to %d", p.batchSize, need, p.recordSize, 1<<30)
	}
	codec, err := compressionCodec(p.compression)
	if err != nil {
		return usageErr("--%v", err)
	}
	p.codec = codec
	p.compression = strings.ToLower(p.compression)
	if p.compression == "" {
		p.compression = "none"
	}
	switch strings.ToLower(p.idemName) {
	case "auto":
		p.idempotent = p.acksName == "all"
	case "on", "true", "1":
		if p.acksName != "all" {
			return usageErr("--idempotence on needs --acks all (Kafka's rule), not --acks %s", p.acksName)
		}
		p.idempotent = true
	case "off", "false", "0":
		p.idempotent = false
	default:
		return usageErr("--idempotence %q: want on, off or auto", p.idemName)
	}
	return nil
}

func (p *producerFlags) opts() []kgo.Opt {
	o := []kgo.Opt{
		kgo.RequiredAcks(p.acks),
		kgo.ProducerLinger(p.linger),
		kgo.ProducerBatchMaxBytes(int32(p.batchSize)),
		kgo.ProducerBatchCompression(p.codec),
		kgo.RecordDeliveryTimeout(60 * time.Second),
		kgo.MaxBufferedRecords(p.maxBuffered),
	}
	if !p.idempotent {
		o = append(o, kgo.DisableIdempotentWrite())
	}
	return o
}

type produceConfig struct {
	common
	producerFlags
	producers int
	rate      float64       // records per second in all; 0: as fast as the broker takes them
	warmup    time.Duration // with --duration: the span not measured at the start
}

type consumeConfig struct {
	common
	group   string
	members int
}

type e2eConfig struct {
	common
	producerFlags
	rate   float64
	warmup time.Duration
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice-bench "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse runs fs.Parse; its errors (already printed by the flag package) become a
// printed usageError, -h stays flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{msg: err.Error(), printed: true}
	}
	return nil
}

func parseProduce(args []string, stderr io.Writer) (*produceConfig, error) {
	c := &produceConfig{}
	fs := newFlagSet("produce", stderr)
	brokers := c.common.register(fs)
	c.producerFlags.register(fs, 10*time.Millisecond)
	fs.IntVar(&c.producers, "producers", 1, "producer clients, each producing its share")
	fs.Float64Var(&c.rate, "rate", 0, "most records per second in all (0: as fast as the broker takes them)")
	fs.DurationVar(&c.warmup, "warmup", 0, "with --duration: send for this long first without measuring; the rate counts the acknowledgements from then to the end of --duration, the latency the records sent in that span")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if err := c.common.finish(fs, *brokers); err != nil {
		return nil, err
	}
	if err := c.producerFlags.finish(0); err != nil {
		return nil, err
	}
	switch {
	case c.durationSet && c.recordsSet:
		return nil, usageErr("produce takes --duration or --records, not both")
	case !c.durationSet && !c.recordsSet:
		c.records = 1_000_000
	}
	if c.producers < 1 || c.producers > maxClients {
		return nil, usageErr("--producers %d: want 1-%d", c.producers, maxClients)
	}
	if !(c.rate >= 0) || c.rate > 10_000_000 {
		return nil, usageErr("--rate %v: want 0 (no limit) to 10000000 records/s", c.rate)
	}
	if c.warmup < 0 || c.warmup > 0 && (!c.durationSet || c.warmup >= c.duration) {
		return nil, usageErr("--warmup %v: want >= 0, and > 0 only with a longer --duration", c.warmup)
	}
	if c.recordsSet && c.records < int64(c.producers) {
		return nil, usageErr("--records %d is fewer than --producers %d", c.records, c.producers)
	}
	return c, nil
}

func parseConsume(args []string, stderr io.Writer) (*consumeConfig, error) {
	c := &consumeConfig{}
	fs := newFlagSet("consume", stderr)
	brokers := c.common.register(fs)
	fs.StringVar(&c.group, "group", "", "consume in this group (default with --members > 1: a fresh sluice-bench-<time> group)")
	fs.IntVar(&c.members, "members", 1, "group members, each its own client (> 1 implies a group)")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if err := c.common.finish(fs, *brokers); err != nil {
		return nil, err
	}
	if c.durationSet && c.recordsSet {
		return nil, usageErr("consume takes --duration or --records (or neither: everything up to the end offsets at the start), not both")
	}
	if c.members < 1 || c.members > maxClients {
		return nil, usageErr("--members %d: want 1-%d", c.members, maxClients)
	}
	if c.members > 1 && c.group == "" {
		c.group = fmt.Sprintf("sluice-bench-%d", time.Now().UnixNano())
	}
	return c, nil
}

func parseE2E(args []string, stderr io.Writer) (*e2eConfig, error) {
	c := &e2eConfig{}
	fs := newFlagSet("e2e", stderr)
	brokers := c.common.register(fs)
	c.producerFlags.register(fs, 0)
	fs.Float64Var(&c.rate, "rate", 1000, "target records per second")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "send for this long first without measuring (inside --duration)")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if err := c.common.finish(fs, *brokers); err != nil {
		return nil, err
	}
	// The value carries the send time and a sequence number: 16 bytes.
	if err := c.producerFlags.finish(e2eHeader); err != nil {
		return nil, err
	}
	if c.recordsSet {
		return nil, usageErr("e2e runs for --duration at --rate; it takes no --records")
	}
	if !c.durationSet {
		c.duration = 20 * time.Second
	}
	if !(c.rate > 0) || c.rate > 10_000_000 {
		return nil, usageErr("--rate %v: want > 0 and <= 10000000 records/s", c.rate)
	}
	if c.warmup < 0 || c.warmup >= c.duration {
		return nil, usageErr("--warmup %v: want >= 0 and shorter than --duration %v", c.warmup, c.duration)
	}
	if c.acksName == "0" {
		return nil, usageErr("e2e needs acknowledged records to count losses: --acks 1 or all")
	}
	return c, nil
}

// compressionCodec returns kgo's codec called name (none or "", gzip, snappy, lz4, zstd).
func compressionCodec(name string) (kgo.CompressionCodec, error) {
	names := []string{"none", "gzip", "snappy", "lz4", "zstd"}
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	if name == "" {
		name = "none"
	}
	if i := slices.Index(names, strings.ToLower(name)); i >= 0 {
		return codecs[i], nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression %q: want none, gzip, snappy, lz4 or zstd", name)
}
