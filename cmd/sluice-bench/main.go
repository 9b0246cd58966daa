// Command sluice-bench is a load generator for Kafka-compatible brokers, built on
// franz-go and modelled on Kafka's producer/consumer perf tests and the OpenMessaging
// benchmark:
//
//	sluice-bench produce [--records N | --duration D] [--record-size B] [--keyed [--keys N]]
//	                     [--acks 0|1|all] [--linger D] [--batch-size B]
//	                     [--compression none|gzip|snappy|lz4|zstd] [--idempotence on|off|auto]
//	                     [--producers N] [--rate R (at most R records/s; default no limit)]
//	                     [--warmup D (with --duration: the first D is not measured)]
//	sluice-bench consume [--records N | --duration D] [--group G] [--members N]
//	sluice-bench e2e     --rate R [--duration D] [--warmup D] [producer flags]
//	sluice-bench acls    [--allow-user U] [--count N] (ACLs for a run on a broker with ACLs)
//	sluice-bench quota   --set KEY=VALUE [--entity TYPE=NAME[,TYPE=NAME]] [--count N] (client quotas)
//
// and, for every subcommand, --brokers, --topic (created if missing with --partitions,
// --replication-factor and any --topic-config KEY=VALUE), --broker-pid PID, --progress,
// --timeout. See each subcommand's -h.
//
// Output: a human-readable summary on stdout, then exactly one JSON line (the only
// stdout line that starts with '{'): records/s, MB/s (10^6 bytes of keys and values),
// latencies in ms, errors, the client's CPU and GC pauses and, with --broker-pid, the
// broker's CPU seconds (utime+stime from /proc/PID/stat, before and after), CPU seconds
// per GiB (2^30 bytes of keys and values) and peak RSS (VmHWM from /proc/PID/status,
// the peak since the broker started). On long runs a progress line goes to stderr.
//
// Exit status: 0 on success, 1 if the run failed or any record failed, 2 for bad flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: sluice-bench <command> [flags]

commands:
  produce   produce records as fast as the client can (or for --duration)
  consume   consume a topic from the start: one consumer, or a group of --members
  e2e       produce at a fixed --rate and consume at once: produce-to-consume latency
  acls      create ACLs for a run against a broker with ACLs (--allow-user, --count)
  quota     set client quotas for a run (--entity, --set, --count)

Run sluice-bench <command> -h for its flags.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var (
		res *result
		err error
		ue  *usageError
	)
	switch args[0] {
	case "produce":
		var c *produceConfig
		if c, err = parseProduce(args[1:], stderr); err == nil {
			res, err = withTimeout(ctx, c.timeout, func(ctx context.Context) (*result, error) {
				return runProduce(ctx, c, stderr)
			})
		}
	case "consume":
		var c *consumeConfig
		if c, err = parseConsume(args[1:], stderr); err == nil {
			res, err = withTimeout(ctx, c.timeout, func(ctx context.Context) (*result, error) {
				return runConsume(ctx, c, stderr)
			})
		}
	case "e2e":
		var c *e2eConfig
		if c, err = parseE2E(args[1:], stderr); err == nil {
			res, err = withTimeout(ctx, c.timeout, func(ctx context.Context) (*result, error) {
				return runE2E(ctx, c, stderr)
			})
		}
	case "acls":
		var c *aclsConfig
		if c, err = parseACLs(args[1:], stderr); err == nil {
			res, err = withTimeout(ctx, c.timeout, func(ctx context.Context) (*result, error) {
				return runACLs(ctx, c, stderr)
			})
		}
	case "quota":
		var c *quotaConfig
		if c, err = parseQuota(args[1:], stderr); err == nil {
			res, err = withTimeout(ctx, c.timeout, func(ctx context.Context) (*result, error) {
				return runQuota(ctx, c, stderr)
			})
		}
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "sluice-bench: unknown command %q\n%s", args[0], usage)
		return 2
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		if !ue.printed {
			fmt.Fprintf(stderr, "sluice-bench %s: %v\n", args[0], ue)
		}
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "sluice-bench %s: %v\n", args[0], err)
		return 1
	}
	res.writeSummary(stdout)
	line, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-bench %s: encode result: %v\n", args[0], err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", line)
	if res.Errors > 0 || res.Lost > 0 {
		fmt.Fprintf(stderr, "sluice-bench %s: %d errors, %d lost: %s\n", args[0], res.Errors, res.Lost, res.FirstError)
		return 1
	}
	return 0
}

// withTimeout runs fn under a context that ends after d (--timeout).
func withTimeout(ctx context.Context, d time.Duration, fn func(context.Context) (*result, error)) (*result, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	res, err := fn(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%w (after --timeout %v)", err, d)
	}
	return res, err
}
