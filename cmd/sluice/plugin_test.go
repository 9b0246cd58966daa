package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestPluginList(t *testing.T) {
	body := `{"plugins":[{"name":"rack-aware","path":"./bin/ra","fallback":"uniform","state":"running","pid":4242,"restarts":1,"calls":10,"errors":2,"fallbacks":2,"last_latency_ms":1.5,"last_error":"plugin process exited"}]}`
	admin := serveAdmin(t, "/v1/plugins", body)
	var out, errb bytes.Buffer
	if rc := run([]string{"plugin", "list", "--admin", admin}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	for _, want := range []string{"NAME", "rack-aware", "running", "4242", "1.50ms", "plugin process exited"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if rc := run([]string{"plugin", "list", "--admin", admin, "--json"}, &out, &errb); rc != 0 || strings.TrimSpace(out.String()) != body {
		t.Fatalf("--json: rc %d %q", rc, out.String())
	}
	if rc := run([]string{"plugin", "bogus"}, &out, &errb); rc != 2 {
		t.Fatalf("unknown subcommand: rc %d", rc)
	}
}
