// Package kfakeref starts the two reference brokers the benchmarks compare Sluice with,
// both built on franz-go's in-process fake cluster (github.com/twmb/franz-go/pkg/kfake):
//
//   - the reference: a one-broker kfake cluster that stores what it is sent (in memory,
//     or in a data dir when one is given), the "kfake with a data dir" of issue 9;
//   - the ceiling: a one-broker kfake cluster that accepts and discards every produce
//     (kfake.BlackholeProduce) and answers every fetch from one canned record batch
//     (kfake.SyntheticFetch), so the broker costs next to nothing and a load tool against
//     it measures the client's own ceiling.
//
// Both listen on 127.0.0.1 only. The program in cmd/sluice-kfake runs either one as its
// own process, so scripts/bench.sh can read its CPU time and RSS from /proc.
//
//	c, err := kfakeref.Start(kfakeref.Options{Port: 0, Mode: kfakeref.Reference, DataDir: dir})
//	defer c.Close()
//	addr := c.ListenAddrs()[0]
//
// # Invariants
//
//   - In Ceiling mode nothing is stored: a consumer reads synthetic batches of
//     SyntheticRecordBytes-byte values at any offset, with a high watermark of 1<<62, so a
//     consume against it must be bounded by a record count or a duration.
//   - Topics are auto-created (one partition unless created with more) for clients that
//     ask for it (kgo.AllowAutoTopicCreation); sluice-bench creates its topics itself.
//
// # Concurrency
//
// kfake serialises every request through one goroutine per cluster; Close stops it and
// its listeners and waits for them.
package kfakeref

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Mode selects which reference broker Start runs.
type Mode int

const (
	// Reference stores records (kfake's log, persisted when DataDir is set).
	Reference Mode = iota
	// Ceiling accepts and discards produce and serves synthetic fetches.
	Ceiling
)

// ParseMode reads "reference" or "ceiling" (the names the program's --mode takes).
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(s) {
	case "reference", "ref":
		return Reference, nil
	case "ceiling", "blackhole":
		return Ceiling, nil
	}
	return 0, fmt.Errorf("mode %q: want reference or ceiling", s)
}

func (m Mode) String() string {
	if m == Ceiling {
		return "ceiling"
	}
	return "reference"
}

// Options configures Start.
type Options struct {
	// Port to listen on (127.0.0.1); 0 lets the kernel choose.
	Port int
	Mode Mode
	// DataDir, in Reference mode, persists the log there (kfake.DataDir; no fsync per
	// batch, like Kafka's and Sluice's defaults). Empty keeps it in memory.
	DataDir string
	// SyntheticRecordBytes is the value size of the records a Ceiling broker serves
	// (default 100).
	SyntheticRecordBytes int
	// SyntheticCompression is the codec of the served batch: none, gzip, snappy, lz4 or
	// zstd (default none).
	SyntheticCompression string
	// SyntheticRandom is the fraction of each served value that is random bytes (the
	// rest compresses to almost nothing); 0 to 1, default 0.
	SyntheticRandom float64
}

// ErrBadOptions marks options Start refuses.
var ErrBadOptions = errors.New("kfakeref: bad options")

// Start starts a one-broker fake cluster. The caller closes it.
func Start(o Options) (*kfake.Cluster, error) {
	if o.Port < 0 || o.Port > 65535 {
		return nil, fmt.Errorf("%w: port %d", ErrBadOptions, o.Port)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(o.Port),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(1),
	}
	switch o.Mode {
	case Reference:
		if o.DataDir != "" {
			opts = append(opts, kfake.DataDir(o.DataDir))
		}
	case Ceiling:
		if o.DataDir != "" {
			return nil, fmt.Errorf("%w: a ceiling broker stores nothing, so takes no data dir", ErrBadOptions)
		}
		if o.SyntheticRecordBytes < 0 {
			return nil, fmt.Errorf("%w: synthetic record bytes %d", ErrBadOptions, o.SyntheticRecordBytes)
		}
		codec, err := Codec(o.SyntheticCompression)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadOptions, err)
		}
		opts = append(opts, kfake.BlackholeProduce(), kfake.SyntheticFetch(kfake.SyntheticBatch{
			RecordBytes: o.SyntheticRecordBytes,
			RandomFrac:  o.SyntheticRandom,
			Compression: codec,
		}))
	default:
		return nil, fmt.Errorf("%w: mode %d", ErrBadOptions, o.Mode)
	}
	return kfake.NewCluster(opts...)
}

// Codec maps a compression name (none, gzip, snappy, lz4, zstd) to franz-go's codec.
func Codec(name string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(name) {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression %q: want none, gzip, snappy, lz4 or zstd", name)
}
