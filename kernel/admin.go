package kernel

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/pprof"
	"time"
)

// The admin listener is HTTP: /healthz (the process is up), /readyz (the broker
// serves: modules started and ready), /metrics (Prometheus text format). Modules add
// their own admin API routes with Context.HandleHTTP. With admin_pprof: true it also
// serves Go's profiler under /debug/pprof/.
//
// Request bodies are bounded in size and in number at once (adminlimit.go).
//
// Every request but the two probes passes the admin gate (admin_auth.go): with an
// authenticating auth module it needs HTTP Basic or a verified client certificate, then
// Describe on the cluster to read (GET, HEAD) or Alter on the cluster for anything else.
func (k *Kernel) startAdmin() {
	k.adminMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	k.adminMux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !k.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	k.adminMux.Handle("GET /metrics", k.metric.Handler(k.log))
	if k.cfg.AdminPprof {
		k.adminMux.HandleFunc("GET /debug/pprof/", pprof.Index)
		k.adminMux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		k.adminMux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		k.adminMux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		k.adminMux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	k.adminSrv = &http.Server{Handler: k.newAdminGate(k.adminLimit), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	ln := k.adminLn
	if tc := k.adminTLSConfig(); tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	k.adminWG.Add(1)
	go func() {
		defer k.adminWG.Done()
		if err := k.adminSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			k.log.Error("admin listener failed", "err", err)
		}
	}()
}
