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
  sluice plugin list [--admin HOST:PORT] [--json]

Lists the broker's assignor plugins (the groups module's assignors: with plugin:):
state (starting, running, restarting, failed, stopped), process id, restarts, calls,
errors, calls answered by the fallback assignor, last call latency and last error.
--admin is the broker's admin HTTP listener (default 127.0.0.1:9644).
`

func pluginCmd(args []string, stdout, stderr io.Writer) int {
	return dispatch("sluice plugin", pluginUsage, args, stdout, stderr, []command{
		{[]string{"list", "ls"}, pluginList},
	})
}

func pluginList(args []string, stdout, stderr io.Writer) int {
	get := func(admin string) ([]byte, error) { return getAdmin(admin, "/v1/plugins") }
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

// listCmd runs a list subcommand (name, e.g. "plugin list"): it reads --admin and
// --json, gets the admin API's JSON with get, and prints it as it is (--json) or as
// the table that table writes from it (an error there is reported, and nothing is
// printed, when table returns it before writing).
func listCmd(name string, args []string, stdout, stderr io.Writer, get func(admin string) ([]byte, error), table func(tw io.Writer, raw []byte) error) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin", "127.0.0.1:9644", "broker admin HTTP address")
	asJSON := fs.Bool("json", false, "print the admin API's JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	raw, err := get(*admin)
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

// getAdmin GETs path from the admin API.
func getAdmin(admin, path string) ([]byte, error) {
	cl := &http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Get("http://" + admin + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(data)))
	}
	return data, nil
}
