package kernel

import "net/http"

// AdminHandler is the admin server's handler (the gate around the mux), so a test can
// serve it over TLS with client certificates.
func (k *Kernel) AdminHandler() http.Handler { return k.adminSrv.Handler }
