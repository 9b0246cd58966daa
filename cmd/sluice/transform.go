package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

const transformUsage = `usage:
  sluice transform deploy --name NAME --input TOPIC [--output TOPIC]... [--mode inline|derived]
                          [--policy reject|drop|dlq] [--dlq-topic TOPIC] [--memory-pages N]
                          [--timeout DURATION] [--env KEY=VALUE]... [ADMIN FLAGS] FILE.wasm
  sluice transform list   [ADMIN FLAGS] [--json]
  sluice transform delete [ADMIN FLAGS] NAME

ADMIN FLAGS: [--admin HOST:PORT|https://HOST:PORT] [--user NAME] [--password PW | --password-file FILE]
             [--ca-file FILE] [--cert FILE --key FILE]

` + adminHelp

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func transformCmd(args []string, stdout, stderr io.Writer) int {
	return dispatch("sluice transform", transformUsage, args, stdout, stderr, []command{
		{[]string{"deploy"}, transformDeploy},
		{[]string{"list"}, transformList},
		{[]string{"delete"}, transformDelete},
	})
}

// transformTimeout bounds one transform request (a deploy compiles the module and
// waits for it to run).
const transformTimeout = 3 * time.Minute

func transformDeploy(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sluice transform deploy", "usage: sluice transform deploy --name NAME --input TOPIC [flags] FILE.wasm\n", stderr)
	name := fs.String("name", "", "transform name")
	input := fs.String("input", "", "input topic")
	var outputs, env multi
	fs.Var(&outputs, "output", "output topic (derived mode; repeat for up to 8)")
	fs.Var(&env, "env", "KEY=VALUE passed to the transform's environment (repeatable)")
	mode := fs.String("mode", "inline", "inline (on produce) or derived (into output topics)")
	policy := fs.String("policy", "reject", "on failure: reject, drop or dlq")
	dlq := fs.String("dlq-topic", "", "dead-letter topic for --policy dlq (default INPUT.NAME.dlq)")
	pages := fs.Uint("memory-pages", 0, "memory limit in 64 KiB pages (0: the broker's default)")
	timeout := fs.Duration("timeout", 0, "deadline per batch (0: the broker's default)")
	var af adminFlags
	af.register(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return exitCode(stderr, fs.Name(), err)
	}
	cl, err := af.client(transformTimeout)
	if err != nil {
		fmt.Fprintf(stderr, "sluice transform deploy: %v\n", err)
		return 2
	}
	if *name == "" || *input == "" || len(pos) != 1 {
		fmt.Fprint(stderr, "sluice transform deploy: need --name, --input and one FILE.wasm\n", transformUsage)
		return 2
	}
	bin, err := os.ReadFile(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "sluice transform deploy: %v\n", err)
		return 1
	}
	q := url.Values{}
	q.Set("input", *input)
	for _, o := range outputs {
		q.Add("output", o)
	}
	for _, e := range env {
		q.Add("env", e)
	}
	q.Set("mode", *mode)
	q.Set("policy", *policy)
	if *dlq != "" {
		q.Set("dlq_topic", *dlq)
	}
	if *pages > 0 {
		q.Set("memory_limit_pages", fmt.Sprint(*pages))
	}
	if *timeout > 0 {
		q.Set("timeout_ms", fmt.Sprint(timeout.Milliseconds()))
	}
	path := "/v1/transforms/" + url.PathEscape(*name) + "?" + q.Encode()
	if err := cl.call(http.MethodPut, path, bytes.NewReader(bin), nil); err != nil {
		fmt.Fprintf(stderr, "sluice transform deploy: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "deployed %s (%s, input %s, %d bytes)\n", *name, *mode, *input, len(bin))
	return 0
}

type transformStatus struct {
	Name          string   `json:"name"`
	Input         string   `json:"input"`
	Outputs       []string `json:"outputs"`
	Mode          string   `json:"mode"`
	ExactlyOnce   bool     `json:"exactly_once"`
	Policy        string   `json:"policy"`
	State         string   `json:"state"`
	LastError     string   `json:"last_error"`
	RecordsIn     int64    `json:"records_in"`
	RecordsOut    int64    `json:"records_out"`
	Failures      int64    `json:"failures"`
	Dropped       int64    `json:"dropped"`
	DeadLettered  int64    `json:"dead_lettered"`
	LatencyLastUs float64  `json:"latency_last_us"`
	LatencyAvgUs  float64  `json:"latency_avg_us"`
}

func transformList(args []string, stdout, stderr io.Writer) int {
	get := func(cl *adminClient) ([]byte, error) {
		var raw json.RawMessage // the value alone: no white space around it
		err := cl.call(http.MethodGet, "/v1/transforms", nil, &raw)
		return raw, err
	}
	return listCmd("transform list", args, stdout, stderr, get, func(tw io.Writer, raw []byte) error {
		var ts []transformStatus
		if err := json.Unmarshal(raw, &ts); err != nil {
			return err
		}
		fmt.Fprintln(tw, "NAME\tMODE\tINPUT\tOUTPUTS\tPOLICY\tSTATE\tIN\tOUT\tERRORS\tDROPPED\tDLQ\tLATENCY(avg)\tLAST ERROR")
		for _, t := range ts {
			outs := strings.Join(t.Outputs, ",")
			if outs == "" {
				outs = "-"
			}
			mode := t.Mode
			if t.ExactlyOnce {
				mode += "/eos" // a derived transform committing outputs and position in transactions
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.0fµs\t%s\n", t.Name, mode, t.Input, outs,
				t.Policy, t.State, t.RecordsIn, t.RecordsOut, t.Failures, t.Dropped, t.DeadLettered, t.LatencyAvgUs, t.LastError)
		}
		return nil
	})
}

func transformDelete(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sluice transform delete", "usage: sluice transform delete NAME [flags]\n", stderr)
	var af adminFlags
	af.register(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return exitCode(stderr, fs.Name(), err)
	}
	cl, err := af.client(transformTimeout)
	if err != nil {
		fmt.Fprintf(stderr, "sluice transform delete: %v\n", err)
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprint(stderr, "sluice transform delete: need one NAME\n", transformUsage)
		return 2
	}
	if err := cl.call(http.MethodDelete, "/v1/transforms/"+url.PathEscape(pos[0]), nil, nil); err != nil {
		fmt.Fprintf(stderr, "sluice transform delete: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "deleted %s\n", pos[0])
	return 0
}
