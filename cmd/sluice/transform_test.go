package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// serveAdmin serves body at path (404 elsewhere) as a fake admin API until the test
// ends, and returns its host:port.
func serveAdmin(t *testing.T, path, body string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestTransformListTable(t *testing.T) {
	body := `[{"name":"router","input":"in","outputs":["a","b"],"mode":"derived","exactly_once":true,"policy":"reject","state":"running","records_in":7,"records_out":7},
{"name":"redact","input":"orders","outputs":[],"mode":"inline","policy":"dlq","state":"running","records_in":3,"records_out":3}]`
	admin := serveAdmin(t, "/v1/transforms", body)
	var out, errb bytes.Buffer
	if rc := run([]string{"transform", "list", "--admin", admin}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 3 || !strings.Contains(lines[1], "derived/eos") || !strings.Contains(lines[1], "a,b") ||
		!strings.Contains(lines[2], "inline ") || strings.Contains(lines[2], "/eos") || !strings.Contains(lines[2], " - ") {
		t.Fatalf("table:\n%s", out.String())
	}
}

// Admin commands take flags after their arguments, $SLUICE_ADMIN as the default
// address, and say what to check when the admin API cannot be reached.
func TestAdminCommandsFlagsAndErrors(t *testing.T) {
	admin := serveAdmin(t, "/v1/transforms/redact", `{}`)
	var out, errb bytes.Buffer
	if rc := run([]string{"transform", "delete", "redact", "--admin", admin}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "deleted redact") {
		t.Fatalf("flags after NAME: rc %d %q %q", rc, out.String(), errb.String())
	}
	t.Setenv(envAdmin, admin)
	out.Reset()
	if rc := run([]string{"transform", "delete", "redact"}, &out, &errb); rc != 0 {
		t.Fatalf("$%s: rc %d %q", envAdmin, rc, errb.String())
	}
	ln := httptest.NewServer(http.NotFoundHandler())
	dead := strings.TrimPrefix(ln.URL, "http://")
	ln.Close()
	errb.Reset()
	if rc := run([]string{"plugin", "list", "--admin", dead}, &out, &errb); rc != 1 || !strings.Contains(errb.String(), "cannot reach the admin API at http://"+dead) ||
		!strings.Contains(errb.String(), "set --admin or $SLUICE_ADMIN") {
		t.Fatalf("unreachable admin: rc %d %q", rc, errb.String())
	}
	errb.Reset()
	if rc := run([]string{"transform", "deploy", "-h"}, &out, &errb); rc != 0 || !strings.Contains(errb.String(), "FILE.wasm") {
		t.Fatalf("deploy -h: rc %d %q", rc, errb.String())
	}
}
