package kernel

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Admin API request bodies are bounded in size and in number at once, so uploads
// (a transform's WASM module is up to 64 MiB) cannot exhaust memory: eight concurrent
// 64 MiB uploads once took 1.2 GB.
//
//	admin_max_body_bytes          a body larger is refused 413 (by Content-Length before
//	                              anything is read, else once the bytes pass the limit)
//	admin_max_concurrent_uploads  requests with a body (not GET, HEAD, OPTIONS) served at
//	                              once; one more is refused 429 with Retry-After at once
//	                              (never queued: a queue of uploads would hold their
//	                              connections, and their bodies, in the kernel)
//
// A body must arrive within adminBodyTimeout, so a stalled upload cannot hold its slot.

// Defaults of the admin body limits.
const (
	DefaultAdminMaxBodyBytes         = 64 << 20
	DefaultAdminMaxConcurrentUploads = 2
	adminBodyTimeout                 = 2 * time.Minute
)

// adminLimiter holds the upload slots (a semaphore of buffered capacity).
type adminLimiter struct {
	maxBody int64
	slots   chan struct{}
	next    http.Handler
	k       *Kernel
}

func (k *Kernel) newAdminLimiter(next http.Handler) (http.Handler, error) {
	maxBody, n := k.cfg.AdminMaxBodyBytes, k.cfg.AdminMaxConcurrentUploads
	if maxBody == 0 {
		maxBody = DefaultAdminMaxBodyBytes
	}
	if n == 0 {
		n = DefaultAdminMaxConcurrentUploads
	}
	if maxBody < 0 || n < 0 {
		return nil, fmt.Errorf("config: admin_max_body_bytes and admin_max_concurrent_uploads must be positive")
	}
	return &adminLimiter{maxBody: maxBody, slots: make(chan struct{}, n), next: next, k: k}, nil
}

func (a *adminLimiter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		a.next.ServeHTTP(w, r)
		return
	}
	if r.ContentLength > a.maxBody {
		a.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes is over admin_max_body_bytes (%d)", r.ContentLength, a.maxBody))
		return
	}
	select {
	case a.slots <- struct{}{}:
	default:
		w.Header().Set("Retry-After", "1")
		a.refuse(w, r, http.StatusTooManyRequests, "too many uploads at once (admin_max_concurrent_uploads "+strconv.Itoa(cap(a.slots))+"); retry")
		return
	}
	defer func() { <-a.slots }()
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(adminBodyTimeout))
	r.Body = http.MaxBytesReader(w, r.Body, a.maxBody)
	a.next.ServeHTTP(w, r)
}

func (a *adminLimiter) refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if ok, dropped := a.k.limitLog.Allow(time.Now()); ok {
		a.k.log.Warn("admin request refused", "method", r.Method, "path", r.URL.Path, "status", code, "reason", msg, "dropped_similar", dropped)
	}
	// Close rather than read what the client still sends.
	w.Header().Set("Connection", "close")
	http.Error(w, msg, code)
}
