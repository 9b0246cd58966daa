// Command sluice is the Sluice broker and its command-line tools.
//
//	sluice serve [--config FILE] [--data-dir DIR] [--listen HOST:PORT] [--admin-listen HOST:PORT]
//	sluice topic create|list|describe|delete|alter-config|add-partitions ...
//	sluice produce TOPIC / sluice consume TOPIC
//	sluice group list|describe|seek|delete ...
//	sluice cluster info|health
//	sluice quota describe|set|delete ...   (see sluice quota help)
//	sluice transform deploy|list|delete ...   (see sluice transform help)
//	sluice plugin list [--admin HOST:PORT] [--user NAME --password PW] [--json]   (see sluice plugin help)
//	sluice log verify [--repair] DIR   (see sluice log help)
//	sluice version
//
// Flags override the config file; with neither, serve runs a single-node broker on
// 127.0.0.1:9092 with data under ./data and the admin HTTP listener on 127.0.0.1:9644.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/standard"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: sluice <command> [flags]

commands:
  serve      run a broker
  topic      create, list, describe, delete and configure topics
  produce    write lines of standard input to a topic
  consume    print a topic's records
  group      list, describe (with lag), seek and delete consumer groups
  cluster    brokers, controller and partition health
  quota      describe, set and delete client quotas
  config     the configuration reference (config defaults)
  transform  deploy, list and delete WASM record transforms
  plugin     list assignor plugins and their state
  log        check (and repair) a data dir's segment logs offline
  version    print the version
`

func run(args []string, stdout, stderr io.Writer) int {
	return dispatch("sluice", usage, args, stdout, stderr, []command{
		{[]string{"serve"}, func(args []string, _, stderr io.Writer) int { return serve(args, stderr) }},
		{[]string{"topic", "topics"}, topicCmd},
		{[]string{"produce"}, produceCmd},
		{[]string{"consume"}, consumeCmd},
		{[]string{"group", "groups"}, groupCmd},
		{[]string{"cluster"}, clusterCmd},
		{[]string{"quota", "quotas"}, quotaCmd},
		{[]string{"config"}, configCmd},
		{[]string{"transform", "transforms"}, transformCmd},
		{[]string{"plugin", "plugins"}, pluginCmd},
		{[]string{"log"}, logCmd},
		{[]string{"version", "--version", "-v"}, func(_ []string, stdout, _ io.Writer) int {
			fmt.Fprintf(stdout, "sluice %s\n", version())
			return 0
		}},
	})
}

// command is one entry of a command table: the names it answers to and what it runs
// with the arguments after its name.
type command struct {
	names []string
	run   func(args []string, stdout, stderr io.Writer) int
}

// dispatch runs the command of cmds that args[0] names. With no arguments it prints
// usage to stderr (exit 2); help, -h and --help print it to stdout (exit 0); an unknown
// name is an error naming prog (exit 2).
func dispatch(prog, usage string, args []string, stdout, stderr io.Writer, cmds []command) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	for _, c := range cmds {
		if slices.Contains(c.names, args[0]) {
			return c.run(args[1:], stdout, stderr)
		}
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n%s", prog, args[0], usage)
	return 2
}

// version is the module version (a tagged build) or "dev", followed by what the Go
// toolchain recorded of the source: the VCS revision, its commit time and whether
// the tree had uncommitted changes, and the Go version.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	v := "dev"
	if mv := bi.Main.Version; mv != "" && mv != "(devel)" && !strings.HasPrefix(mv, "v0.0.0-") { // not a pseudo-version
		v = mv
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+changes"
			}
		}
	}
	if rev != "" {
		v += fmt.Sprintf(" (revision %.12s%s, committed %s)", rev, dirty, at)
	}
	return v + " " + bi.GoVersion
}

func serve(args []string, stderr io.Writer) int {
	fs := newFlagSet("sluice serve", `usage: sluice serve [--config FILE] [--data-dir DIR] [--listen HOST:PORT] [--admin-listen HOST:PORT]

Runs a broker. Without a config file it is a single node: the client listener on
127.0.0.1:9092, the admin HTTP listener (health, metrics, transforms) on
127.0.0.1:9644, data under ./data. Flags override the file; the file's keys are in
README.md and examples/configs. SIGINT or SIGTERM stops it in order.
`, stderr)
	configPath := fs.String("config", "", "config file (YAML; default: none, the single-node defaults)")
	dataDir := fs.String("data-dir", "", "data directory (overrides data_dir; default ./data)")
	listen := fs.String("listen", "", "client listener HOST:PORT (overrides the first listener; default 127.0.0.1:9092)")
	adminListen := fs.String("admin-listen", "", "admin HTTP listener HOST:PORT (overrides admin_listen; default 127.0.0.1:9644)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return exitCode(stderr, "sluice serve", err)
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "sluice serve: unexpected arguments %q\n", pos)
		return 2
	}
	// The whole config is checked here, before anything is bound, created or
	// written, and every problem is reported at once: the file's own keys, the broker
	// configs (the metadata module checks them again for brokers built without serve),
	// and every module section with its Check.
	var problems kernel.ConfigErrors
	cfg := &kernel.Config{}
	if *configPath != "" {
		data, err := os.ReadFile(*configPath)
		if err != nil {
			fmt.Fprintf(stderr, "sluice: config: %v\n", err)
			return 1
		}
		if cfg, err = kernel.DecodeConfig(data); cfg == nil {
			fmt.Fprintf(stderr, "sluice: %s: %v\n", *configPath, err)
			return 1
		}
		problems = problems.Add(err)
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	if *listen != "" {
		if len(cfg.Listeners) == 0 {
			cfg.Listeners = []kernel.ListenerConfig{{Name: "PLAINTEXT"}}
		}
		cfg.Listeners[0].Address = *listen
	}
	if *adminListen != "" {
		cfg.AdminListen = *adminListen
	}
	var bad kernel.ConfigErrors
	for _, err := range bad.Add(kconfig.ValidateStaticBrokers(cfg.Configs)) {
		problems = append(problems, fmt.Errorf("configs: %w", err))
	}
	reg := kernel.NewRegistry()
	standard.Register(reg)
	problems = problems.Add(kernel.CheckConfig(cfg, reg))
	if len(problems) > 0 {
		where := "config"
		if *configPath != "" {
			where = *configPath
		}
		fmt.Fprintf(stderr, "sluice: %s: %v\n", where, problems.ByLine())
		return 1
	}
	log, err := newLogger(cfg.Log, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "sluice: %v\n", err)
		return 1
	}
	if err := applyMemoryLimit(cfg, log); err != nil {
		fmt.Fprintf(stderr, "sluice: %v\n", err)
		return 1
	}
	k, err := kernel.New(cfg, reg, log)
	if err != nil {
		fmt.Fprintf(stderr, "sluice: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = k.Start(startCtx)
	cancel()
	if err != nil {
		log.Error("startup failed", "err", err)
		return 1
	}
	<-ctx.Done()
	stop() // a second signal now kills the process the default way
	shutCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.Shutdown(shutCtx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("shutdown", "err", err)
		return 1
	}
	return 0
}

func newLogger(s kernel.LogSettings, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	switch strings.ToLower(s.Level) {
	case "", "info":
		lvl = slog.LevelInfo
	case "debug":
		lvl = slog.LevelDebug
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		return nil, fmt.Errorf("config: log.level %q: want debug, info, warn or error", s.Level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(s.Format) {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("config: log.format %q: want text or json", s.Format)
	}
}
