package console

import (
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure a Console.
type Options struct {
	// Credentials are the auth.tokens of the gateway (gateway.LoadCredentials); the admin token
	// is added by the gateway. A person signs in with one whose principal has role admin or
	// viewer.
	Credentials []gateway.Credential
	// Config is the config the gateway started with: console settings and allowed origins.
	Config *config.Config
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. Tests set it.
	Now func() time.Time
}

// Console serves the operator console under /console.
type Console struct {
	g      *gateway.Gateway
	creds  []gateway.Credential
	log    *slog.Logger
	now    func() time.Time
	tmpl   *template.Template
	static http.Handler

	viewerMayHalt bool
	origins       []config.Origin

	sessions *sessions
	signins  *signinLimiter
	state    *stateCache
	mux      *http.ServeMux

	// pushEvery is how often an event stream looks for a change; heartbeatEvery how often it
	// says it is alive when nothing changed.
	pushEvery, heartbeatEvery time.Duration
}

// New builds the console of g. Mount it with g.MountConsole.
func New(g *gateway.Gateway, opts Options) *Console {
	c := &Console{
		g: g, creds: opts.Credentials, log: opts.Logger, now: opts.Now,
		pushEvery: 500 * time.Millisecond, heartbeatEvery: 5 * time.Second,
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	ttl := config.DefaultConsoleSessionTTL
	cfg := opts.Config
	if cfg == nil {
		cfg = &config.Config{}
	}
	if d := time.Duration(cfg.Console.SessionTTL); d > 0 {
		ttl = d
	}
	c.viewerMayHalt = cfg.Console.ViewerHalts()
	for _, s := range cfg.Gateway.AllowedOrigins {
		if o, err := config.ParseOrigin(s); err == nil {
			c.origins = append(c.origins, o)
		}
	}
	c.sessions = newSessions(ttl, c.now)
	c.signins = newSigninLimiter(c.now)
	c.state = &stateCache{c: c}
	c.tmpl = template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html"))
	sub, _ := fs.Sub(staticFS, "static")
	c.static = http.StripPrefix("/console/static/", http.FileServerFS(sub))
	c.routes()
	return c
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusFound)
	})
	m.HandleFunc("GET /console/{$}", c.servePage)
	m.HandleFunc("GET /console/static/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		c.static.ServeHTTP(w, r)
	})
	m.HandleFunc("POST /console/login", c.serveLogin)
	m.Handle("POST /console/logout", c.ownSession(c.serveLogout))
	m.Handle("GET /console/state", c.signedIn(c.serveState))
	m.Handle("GET /console/events", c.signedIn(c.serveEvents))
	m.Handle("GET /console/audit", c.signedIn(c.serveAudit))
	m.Handle("GET /console/audit/{seq}", c.signedIn(c.serveAuditRecord))
	m.Handle("POST /console/api/halt", c.act(true, c.serveHalt))
	m.Handle("POST /console/api/lock/{server}", c.act(false, c.serveLock))
	m.Handle("POST /console/api/unlock/{server}", c.act(false, c.serveUnlock))
	m.Handle("POST /console/api/approvals/{id}/approve", c.act(false, c.serveDecide(true)))
	m.Handle("POST /console/api/approvals/{id}/deny", c.act(false, c.serveDecide(false)))
	m.Handle("POST /console/api/pins/{server}/accept", c.act(false, c.serveAcceptPins))
	m.Handle("POST /console/api/reload", c.act(false, c.serveReload))
	c.mux = m
}

// ServeHTTP serves every console route with its security headers: a strict
// Content-Security-Policy (scripts, styles and connections from the gateway only, never inline;
// no frames, forms post only here), no framing at all, no sniffing, no referrer to other sites and no caching
// of pages that show the robot's state.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// Not no-referrer: under it a browser sends "Origin: null" with a same-origin POST, which
	// the Origin check must refuse.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

// sameOrigin reports whether a state-changing request comes from a page of this console: its
// Origin is the origin the request was sent to, or one of gateway.allowed_origins (the list
// /mcp checks). A browser sends Origin with every POST; a request without one is refused, as
// nothing but a browser page has reason to post to the console.
func (c *Console) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	o, err := config.ParseOrigin(origin)
	if err != nil || o.Port == "*" {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if self, err := config.ParseOrigin(scheme + "://" + r.Host); err == nil && self == o {
		return true
	}
	for _, a := range c.origins {
		if a.Allows(o) {
			return true
		}
	}
	return false
}

var funcs = template.FuncMap{
	"rfc3339": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	},
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
	"lower": strings.ToLower,
	"join":  strings.Join,
	"short": func(s string, n int) string {
		if r := []rune(s); len(r) > n {
			return string(r[:n]) + "…"
		}
		return s
	},
}

// render executes the named template into w; an error is logged (the headers are gone).
func (c *Console) render(w http.ResponseWriter, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := c.tmpl.ExecuteTemplate(w, name, data); err != nil {
		c.log.Error("console: rendering a page", "template", name, "error", err)
	}
}

// renderString executes the named template to a string.
func (c *Console) renderString(name string, data any) string {
	var b strings.Builder
	if err := c.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		c.log.Error("console: rendering a fragment", "template", name, "error", err)
	}
	return b.String()
}

var _ http.Handler = (*Console)(nil)
