package kernel_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernel"
)

// uploadModule serves PUT /v1/upload: it reads the body, then waits for release.
type uploadModule struct {
	entered chan struct{}
	release chan struct{}
}

func (m *uploadModule) Provision(ctx kernel.Context) error {
	ctx.HandleHTTP("PUT /v1/upload", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m.entered <- struct{}{}
		<-m.release
		w.WriteHeader(http.StatusCreated)
	}))
	return nil
}

func TestAdminUploadLimits(t *testing.T) {
	mod := &uploadModule{entered: make(chan struct{}, 8), release: make(chan struct{})}
	reg := kernel.NewRegistry()
	reg.Register(kernel.ModuleInfo{ID: "upload.basic", New: func() kernel.Module { return mod }})
	k := unstartedKernel(t, reg, "admin_max_body_bytes: 1000\nadmin_max_concurrent_uploads: 2\nmodules: {upload: {use: basic}}\n")
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Shutdown(context.Background()) })
	url := "http://" + k.AdminAddr().String() + "/v1/upload"
	put := func(body io.Reader, n int64) int {
		req, _ := http.NewRequest(http.MethodPut, url, body)
		req.ContentLength = n
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// Over the size: by Content-Length, and in a chunked body.
	if code := put(bytes.NewReader(make([]byte, 1001)), 1001); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized upload: %d", code)
	}
	if code := put(io.MultiReader(strings.NewReader(strings.Repeat("x", 2000))), -1); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized chunked upload: %d", code)
	}
	// Two uploads in flight; the third is refused at once.
	codes := make(chan int, 2)
	for range 2 {
		go func() { codes <- put(strings.NewReader("ok"), 2) }()
	}
	for range 2 {
		select {
		case <-mod.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("uploads within the limit did not reach the handler")
		}
	}
	if code := put(strings.NewReader("ok"), 2); code != http.StatusTooManyRequests {
		t.Fatalf("third concurrent upload: %d, want 429", code)
	}
	// Reads are not limited.
	if r, err := http.Get("http://" + k.AdminAddr().String() + "/healthz"); err != nil || r.StatusCode != 200 {
		t.Fatalf("GET during uploads: %v", err)
	}
	close(mod.release)
	for range 2 {
		if c := <-codes; c != http.StatusCreated {
			t.Fatalf("upload within the limit: %d", c)
		}
	}
	if code := put(strings.NewReader("ok"), 2); code != http.StatusCreated {
		t.Fatalf("upload after the others finished: %d", code)
	}
}
