package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/modules/groups"
)

const pluginUsage = `usage:
  sluice plugin list [--admin HOST:PORT|https://HOST:PORT] [--user NAME] [--password PW | --password-file FILE]
                     [--ca-file FILE] [--cert FILE --key FILE] [--json]

Lists the broker's assignor plugins (the groups module's assignors: with plugin:):
state (starting, running, restarting, failed, stopped), process id, restarts, calls,
errors, calls answered by the fallback assignor, last call latency and last error.

` + adminHelp

func pluginCmd(args []string, stdout, stderr io.Writer) int {
	return dispatch("sluice plugin", pluginUsage, args, stdout, stderr, []command{
		{[]string{"list", "ls"}, pluginList},
	})
}

func pluginList(args []string, stdout, stderr io.Writer) int {
	get := func(cl *adminClient) ([]byte, error) { return cl.do(http.MethodGet, "/v1/plugins", nil) }
	return listCmd("plugin list", args, stdout, stderr, get, func(tw io.Writer, raw []byte) error {
		var body struct {
			Plugins []groups.PluginStats `json:"plugins"`
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			return err
		}
		fmt.Fprintln(tw, "NAME\tKIND\tSTATE\tPID\tRESTARTS\tCALLS\tERRORS\tFALLBACKS\tLAST LATENCY\tLAST ERROR")
		for _, p := range body.Plugins {
			pid := "-"
			if p.PID != 0 {
				pid = fmt.Sprint(p.PID)
			}
			lastErr := p.LastError
			if lastErr == "" {
				lastErr = "-"
			}
			fmt.Fprintf(tw, "%s\tassignor\t%s\t%s\t%d\t%d\t%d\t%d\t%.2fms\t%s\n", p.Name, p.State, pid, p.Restarts,
				p.Calls, p.Errors, p.Fallbacks, p.LastLatencyMs, lastErr)
		}
		return nil
	})
}

// listCmd runs a list subcommand (name, e.g. "plugin list"): it reads the admin flags
// and --json, gets the admin API's JSON with get, and prints it as it is (--json) or as
// the table that table writes from it (an error there is reported, and nothing is
// printed, when table returns it before writing).
func listCmd(name string, args []string, stdout, stderr io.Writer, get func(cl *adminClient) ([]byte, error), table func(tw io.Writer, raw []byte) error) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var af adminFlags
	af.register(fs)
	asJSON := fs.Bool("json", false, "print the admin API's JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return exitCode(stderr, "sluice "+name, err)
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "sluice %s: unexpected arguments %q\n", name, pos)
		return 2
	}
	cl, err := af.client(30 * time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "sluice %s: %v\n", name, err)
		return 2
	}
	raw, err := get(cl)
	if err != nil {
		fmt.Fprintf(stderr, "sluice %s: %v\n", name, err)
		return 1
	}
	if *asJSON {
		fmt.Fprintln(stdout, strings.TrimSpace(string(raw)))
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if err := table(tw, raw); err != nil {
		fmt.Fprintf(stderr, "sluice %s: %v\n", name, err)
		return 1
	}
	_ = tw.Flush()
	return 0
}
