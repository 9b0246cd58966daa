package transforms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/transforms/wasm"
)

// The admin HTTP API (on the broker's admin listener):
//
//	PUT    /v1/transforms/{name}?input=T[&output=O]...[&mode=inline|derived]
//	       [&policy=reject|drop|dlq][&dlq_topic=D][&memory_limit_pages=N]
//	       [&timeout_ms=N][&env=K=V]...        body: the WASM module
//	GET    /v1/transforms                      JSON list with state and stats
//	DELETE /v1/transforms/{name}
//
// Errors are JSON {"error": "..."} with 400 (bad settings or module), 404 (no such
// transform), 413 (module over max_upload_bytes) or 503 (metadata not writable here);
// the kernel answers 413 over admin_max_body_bytes and 429 past
// admin_max_concurrent_uploads before the handler runs. The kernel
// authenticates and authorizes every request before it gets here (kernel/admin_auth.go:
// with an authenticating auth module, GET needs Describe and PUT/DELETE Alter on the
// cluster; 401 and 403 come from there); deploys and deletes are logged with the
// principal.

// adminPrincipal names who made an admin request, for the audit lines.
func adminPrincipal(r *http.Request) string {
	p, _ := kernel.AdminPrincipal(r)
	return p.String()
}

// Status is one transform as GET /v1/transforms shows it.
type Status struct {
	Deployment
	State         string  `json:"state"`
	LastError     string  `json:"last_error,omitempty"`
	ABI           string  `json:"abi,omitempty"`
	RecordsIn     int64   `json:"records_in"`
	RecordsOut    int64   `json:"records_out"`
	Batches       int64   `json:"batches"`
	Failures      int64   `json:"failures"`
	Dropped       int64   `json:"dropped"`
	DeadLettered  int64   `json:"dead_lettered"`
	LatencyLastUs float64 `json:"latency_last_us"`
	LatencyAvgUs  float64 `json:"latency_avg_us"`
	Pauses        int     `json:"pauses"`
	// ExactlyOnce: a derived transform whose workers commit outputs and position in
	// transactions; Positions are the committed positions (next input offset) of the
	// input partitions this broker leads.
	ExactlyOnce bool            `json:"exactly_once,omitempty"`
	Positions   map[int32]int64 `json:"positions,omitempty"`
}

func (m *Module) httpHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/v1/transforms"), "/")
		switch {
		case r.Method == http.MethodGet && name == "":
			m.serveList(w)
		case r.Method == http.MethodPut && name != "":
			m.serveDeploy(w, r, name)
		case r.Method == http.MethodDelete && name != "":
			m.serveDelete(w, r, name)
		default:
			httpError(w, http.StatusMethodNotAllowed, "use GET /v1/transforms, PUT or DELETE /v1/transforms/{name}")
		}
	})
}

// maxUpload is the effective bound on a deployed module's size.
func (m *Module) maxUpload() int64 {
	if m.MaxUploadBytes <= 0 || m.MaxUploadBytes > MaxBinaryBytes {
		return MaxBinaryBytes
	}
	return m.MaxUploadBytes
}

// errUploadTooLarge: the module's bytes passed the upload bound.
var errUploadTooLarge = errors.New("module too large")

// readUpload reads a request body of at most limit bytes. With a Content-Length it
// checks the length first and reads into one buffer of exactly that size (no doubling
// growth, whose copies made a 64 MiB upload cost several times that); without, it reads
// in growing steps and stops one byte past the limit.
func readUpload(r *http.Request, limit int64) ([]byte, error) {
	if n := r.ContentLength; n >= 0 {
		if n > limit {
			return nil, errUploadTooLarge
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	bin, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(bin)) > limit {
		return nil, errUploadTooLarge
	}
	return bin, nil
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func (m *Module) serveList(w http.ResponseWriter) {
	out := m.statuses()
	if out == nil {
		out = []Status{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// statuses returns the status of every transform deployed here, by name.
func (m *Module) statuses() []Status {
	var out []Status
	for _, t := range m.list() {
		out = append(out, t.status())
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// status is the transform's deployment, state and counters.
func (t *transform) status() Status {
	st, lastErr := t.state()
	s := Status{
		Deployment: t.dep, State: st, LastError: lastErr,
		RecordsIn: t.recordsIn.Load(), RecordsOut: t.recordsOut.Load(), Batches: t.batches.Load(),
		Failures: t.failures.Load(), Dropped: t.dropped.Load(), DeadLettered: t.dlq.Load(),
		LatencyLastUs: float64(t.latencyNs.Load()) / 1e3, LatencyAvgUs: float64(t.latencyEWMA.Load()) / 1e3,
	}
	t.mu.Lock()
	s.Pauses = t.pauses
	t.mu.Unlock()
	if t.prog != nil {
		s.ABI = string(t.prog.ABI())
	}
	if t.derived != nil {
		s.ExactlyOnce, s.Positions = t.derived.status()
	}
	return s
}

func (m *Module) serveDeploy(w http.ResponseWriter, r *http.Request, name string) {
	q := r.URL.Query()
	d := &Deployment{
		Name: name, Input: q.Get("input"), Outputs: q["output"], Mode: q.Get("mode"),
		Policy: q.Get("policy"), DLQTopic: q.Get("dlq_topic"), DeployedAtMs: m.now().UnixMilli(),
	}
	for _, kv := range q["env"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("env %q: want KEY=VALUE", kv))
			return
		}
		if d.Env == nil {
			d.Env = map[string]string{}
		}
		d.Env[k] = v
	}
	for _, f := range []struct {
		key string
		set func(int64)
	}{
		{"memory_limit_pages", func(n int64) { d.MemoryLimitPages = uint32(n) }},
		{"timeout_ms", func(n int64) { d.TimeoutMs = n }},
	} {
		if s := q.Get(f.key); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 0 || n > 1<<32-1 {
				httpError(w, http.StatusBadRequest, fmt.Sprintf("%s=%q: want a non-negative integer", f.key, s))
				return
			}
			f.set(n)
		}
	}
	im := m.meta.Image()
	if err := d.Validate(im, m.inlineOwner); err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	maxBin := m.maxUpload()
	bin, err := readUpload(r, maxBin)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge) || errors.Is(err, errUploadTooLarge):
		httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the module is larger than %d bytes", maxBin))
		return
	case err != nil:
		httpError(w, http.StatusBadRequest, "reading the module: "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	pages := d.MemoryLimitPages
	if pages == 0 {
		pages = m.MemoryLimitPages
	}
	// Compile before storing: a module that cannot run is refused here, not found
	// broken on every broker later. (The compiled code lands in the cache, so the
	// broker's own start of the transform is quick.)
	prog, err := m.engine.Compile(ctx, bin, pages)
	if err != nil {
		code := http.StatusBadRequest
		if !errors.Is(err, wasm.ErrInvalidModule) {
			code = http.StatusInternalServerError
		}
		httpError(w, code, err.Error())
		return
	}
	_ = prog.Close(ctx)
	v, err := Encode(d, bin)
	if err != nil {
		httpError(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	if d.Policy == PolicyDLQ && im.Topic(d.DLQTopic) == nil && m.creator != nil {
		if _, err := m.creator.CreateTopic(ctx, d.DLQTopic, -1, -1, nil); err != nil {
			httpError(w, http.StatusServiceUnavailable, "creating the dead-letter topic: "+err.Error())
			return
		}
	}
	if err := m.ext.PutExtension(ctx, Namespace, name, v); err != nil {
		httpError(w, http.StatusServiceUnavailable, "storing the deployment: "+err.Error())
		return
	}
	if err := m.waitRunning(ctx, name, d.DeployedAtMs); err != nil {
		httpError(w, http.StatusServiceUnavailable, "the deployment is stored but not running here yet: "+err.Error())
		return
	}
	m.log.Info("transform deployed", "transform", name, "mode", d.Mode, "input", d.Input, "outputs", d.Outputs,
		"policy", d.Policy, "bytes", len(bin), "stored_bytes", len(v), "principal", adminPrincipal(r))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(d)
}

func (m *Module) serveDelete(w http.ResponseWriter, r *http.Request, name string) {
	if m.meta.Image().Extension(Namespace, name) == nil {
		httpError(w, http.StatusNotFound, "no transform named "+name)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if err := m.ext.PutExtension(ctx, Namespace, name, nil); err != nil {
		httpError(w, http.StatusServiceUnavailable, "deleting the deployment: "+err.Error())
		return
	}
	if err := m.waitRunning(ctx, name, -1); err != nil {
		httpError(w, http.StatusServiceUnavailable, "the deletion is stored but the transform still runs here: "+err.Error())
		return
	}
	m.log.Info("transform deleted", "transform", name, "principal", adminPrincipal(r))
	w.WriteHeader(http.StatusNoContent)
}
