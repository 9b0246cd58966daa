package console

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"path"
	"sync"
)

// ui holds the page: index.html (a template for the refresh interval), app.js and
// style.css. They are plain files, no build step: the broker builds with the Go
// toolchain alone.
//
//go:embed ui
var ui embed.FS

// page is index.html rendered once for the module's settings.
type page struct {
	once sync.Once
	html []byte
	err  error
}

var assetTypes = map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}

func (m *Module) renderPage() ([]byte, error) {
	m.page.once.Do(func() {
		t, err := template.ParseFS(ui, "ui/index.html")
		if err != nil {
			m.page.err = err
			return
		}
		var b bytes.Buffer
		m.page.err = t.Execute(&b, struct{ RefreshMs int }{m.RefreshMs})
		m.page.html = b.Bytes()
	})
	return m.page.html, m.page.err
}

// servePage is GET /: the console.
func (m *Module) servePage(w http.ResponseWriter, _ *http.Request) {
	html, err := m.renderPage()
	if err != nil {
		http.Error(w, "console page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	setPageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(html)
}

// serveAsset is GET /console/{file}: the script and the style sheet.
func (m *Module) serveAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	typ, ok := assetTypes[path.Ext(name)]
	if !ok {
		http.NotFound(w, r)
		return
	}
	b, err := ui.ReadFile("ui/" + name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	setPageHeaders(w)
	w.Header().Set("Content-Type", typ)
	_, _ = w.Write(b)
}

// setPageHeaders keeps the page to its own origin: no inline script, no framing.
func setPageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}
