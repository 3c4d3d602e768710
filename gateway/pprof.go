package gateway

import (
	"net/http"
	"net/http/pprof"
)

// registerPprof serves Go's profiler under /admin/debug/pprof/ (gateway.pprof), behind the admin
// API's authentication like every /admin route: a profile shows what the gateway does, and its
// endpoints cost CPU while they run. The handlers expect their paths under /debug/pprof/.
func registerPprof(mux *http.ServeMux) {
	strip := func(h http.HandlerFunc) http.Handler { return http.StripPrefix("/admin", h) }
	mux.Handle("GET /admin/debug/pprof/", strip(pprof.Index))
	mux.Handle("GET /admin/debug/pprof/cmdline", strip(pprof.Cmdline))
	mux.Handle("GET /admin/debug/pprof/profile", strip(pprof.Profile))
	mux.Handle("GET /admin/debug/pprof/symbol", strip(pprof.Symbol))
	mux.Handle("GET /admin/debug/pprof/trace", strip(pprof.Trace))
}
