// Command sluice-kfake runs one of the reference brokers of scripts/bench.sh (see package
// kfakeref) as its own process, until SIGINT or SIGTERM:
//
//	sluice-kfake --mode reference [--port N] [--data-dir DIR]
//	sluice-kfake --mode ceiling [--port N] [--synthetic-bytes 100] [--synthetic-compression none] [--front]
//
// With --front the port is a kfakeref.Front (the client's ceiling: produce acknowledged
// unread, fetches answered from one encoded response, everything else relayed to the
// ceiling kfake).
//
// Once it listens it prints one line to stdout, "listening 127.0.0.1:PORT", so a script
// can wait for it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicehq/sluice/bench/internal/kfakeref"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice-kfake", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mode := fs.String("mode", "reference", "reference (stores records) or ceiling (accepts and discards)")
	port := fs.Int("port", 0, "port on 127.0.0.1 (0: any free port)")
	dataDir := fs.String("data-dir", "", "reference mode: persist the log in this directory")
	synBytes := fs.Int("synthetic-bytes", 100, "ceiling mode: value size of the served records")
	synCodec := fs.String("synthetic-compression", "none", "ceiling mode: codec of the served batch")
	synRandom := fs.Float64("synthetic-random", 1, "ceiling mode: random fraction of each served value (0-1)")
	front := fs.Bool("front", false, "ceiling mode: answer produce and fetch itself (kfakeref.Front: the client ceiling)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice-kfake: unexpected arguments %q\n", fs.Args())
		return 2
	}
	m, err := kfakeref.ParseMode(*mode)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-kfake: --%v\n", err)
		return 2
	}
	if *front && m != kfakeref.Ceiling {
		fmt.Fprintln(stderr, "sluice-kfake: --front needs --mode ceiling")
		return 2
	}
	kport := *port
	if *front {
		kport = 0 // the front takes the port
	}
	c, err := kfakeref.Start(kfakeref.Options{
		Port: kport, Mode: m, DataDir: *dataDir,
		SyntheticRecordBytes: *synBytes, SyntheticCompression: *synCodec, SyntheticRandom: *synRandom,
	})
	if err != nil {
		fmt.Fprintf(stderr, "sluice-kfake: %v\n", err)
		return 1
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	if *front {
		batch, n, err := kfakeref.CannedBatch(*synBytes, *synRandom, *synCodec, 128<<10)
		if err != nil {
			fmt.Fprintf(stderr, "sluice-kfake: %v\n", err)
			return 1
		}
		f, err := kfakeref.StartFront(*port, addr, batch, n)
		if err != nil {
			fmt.Fprintf(stderr, "sluice-kfake: %v\n", err)
			return 1
		}
		defer f.Close()
		addr = f.Addr()
	}
	fmt.Fprintf(stdout, "listening %s\n", addr)
	<-ctx.Done()
	return 0
}
