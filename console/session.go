package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// Sign-in. A person pastes a bearer token of auth.tokens (or the admin token, or with
// auth.oidc an access token of the identity provider, the sign-in then ending when the token
// expires) once; the console
// answers with a session cookie and never sees the token again. The cookie is HttpOnly (no
// script reads it), SameSite=Strict (no other site's page sends it), Secure over TLS, scoped to
// /console, and expires with the session. Every state-changing request also carries the
// session's CSRF token, which only the console's own pages hold, and an Origin of this console.

const cookieName = "mcp_gateway_console"

// maxSessions bounds the sessions kept; the oldest is dropped to make room.
const maxSessions = 256

// session is one signed-in person.
type session struct {
	id        string
	principal gateway.Principal
	csrf      string
	expires   time.Time
}

type sessions struct {
	ttl time.Duration
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*session
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{ttl: ttl, now: now, m: map[string]*session{}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *sessions) start(p gateway.Principal, until time.Time) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for id, old := range s.m {
		if !now.Before(old.expires) {
			delete(s.m, id)
		}
	}
	for len(s.m) >= maxSessions {
		var oldest *session
		for _, old := range s.m {
			if oldest == nil || old.expires.Before(oldest.expires) {
				oldest = old
			}
		}
		delete(s.m, oldest.id)
	}
	expires := now.Add(s.ttl)
	if !until.IsZero() && until.Before(expires) {
		// An identity provider's token: the sign-in lasts no longer than the token would.
		expires = until
	}
	ss := &session{id: randomHex(32), principal: p, csrf: randomHex(32), expires: expires}
	s.m[ss.id] = ss
	return ss
}

// lookup is the live session of the request's cookie, or nil.
func (s *sessions) lookup(r *http.Request) *session {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[ck.Value]
	if ss == nil {
		return nil
	}
	if !s.now().Before(ss.expires) {
		delete(s.m, ss.id)
		return nil
	}
	return ss
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// canAct reports whether the person may do more than look (and HALT).
func (ss *session) canAct() bool { return ss.principal.HasRole(config.RoleAdmin) }

// role is the role the console grants: admin or viewer.
func (ss *session) role() string {
	if ss.canAct() {
		return config.RoleAdmin
	}
	return config.RoleViewer
}

type sessionKey struct{}

func sessionOf(r *http.Request) *session {
	ss, _ := r.Context().Value(sessionKey{}).(*session)
	return ss
}

// signedIn serves h to a request with a live session; a page request without one gets the
// sign-in page, an API request 401.
func (c *Console) signedIn(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ss := c.sessions.lookup(r)
		if ss == nil {
			if r.URL.Path == "/console/state" || r.URL.Path == "/console/events" {
				writeJSON(w, http.StatusUnauthorized, errorBody{Error: "not signed in, or the session expired: sign in again"})
				return
			}
			c.renderLogin(w, http.StatusUnauthorized, "")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, ss)))
	})
}

// act serves h to a state-changing request that passes, in this order: the Origin check, a
// live session, its CSRF token (header X-CSRF-Token or form field csrf, compared in constant
// time) and the role: admin, or for HALT (mayHalt) a viewer when console.viewer_may_halt.
func (c *Console) act(mayHalt bool, h http.HandlerFunc) http.Handler {
	return c.actIf(func(ss *session) bool { return ss.canAct() || (mayHalt && c.viewerMayHalt) }, h)
}

// ownSession is act for what every role may do to its own session: sign out.
func (c *Console) ownSession(h http.HandlerFunc) http.Handler {
	return c.actIf(func(*session) bool { return true }, h)
}

func (c *Console) actIf(may func(*session) bool, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.sameOrigin(r) {
			writeJSON(w, http.StatusForbidden, errorBody{Error: "refused: this request does not come from a page of this console (Origin)"})
			return
		}
		ss := c.sessions.lookup(r)
		if ss == nil {
			writeJSON(w, http.StatusUnauthorized, errorBody{Error: "not signed in, or the session expired: sign in again"})
			return
		}
		token := r.Header.Get("X-CSRF-Token")
		if token == "" {
			token = r.PostFormValue("csrf")
		}
		if subtle.ConstantTimeCompare([]byte(token), []byte(ss.csrf)) != 1 {
			writeJSON(w, http.StatusForbidden, errorBody{Error: "refused: the request lacks this session's CSRF token; reload the page"})
			return
		}
		if !may(ss) {
			writeJSON(w, http.StatusForbidden, errorBody{Error: fmt.Sprintf("refused: %s signed in with role %s, which may look but not act", ss.principal.ID, config.RoleViewer)})
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, ss)))
	})
}

// Bad sign-ins are limited per client address (signinBurst per signinWindow) and in total
// (signinTotal per window), so a guesser learns nothing fast; each refused attempt that was
// checked is audited, and the throttled ones are counted in the log.
const (
	signinWindow = time.Minute
	signinBurst  = 5
	signinTotal  = 30
)

type signinLimiter struct {
	now   func() time.Time
	mu    sync.Mutex
	start time.Time
	byIP  map[string]int
	total int
}

func newSigninLimiter(now func() time.Time) *signinLimiter {
	return &signinLimiter{now: now, byIP: map[string]int{}}
}

// allow reports whether a sign-in from ip may be checked now, and when to retry if not.
func (l *signinLimiter) allow(ip string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.start) >= signinWindow {
		l.start, l.byIP, l.total = now, map[string]int{}, 0
	}
	if l.byIP[ip] >= signinBurst || l.total >= signinTotal {
		return false, l.start.Add(signinWindow).Sub(now)
	}
	return true, 0
}

// failed counts a refused sign-in from ip.
func (l *signinLimiter) failed(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byIP[ip]++
	l.total++
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

type loginPage struct {
	Gateway string
	Error   string
}

func (c *Console) renderLogin(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := c.tmpl.ExecuteTemplate(w, "login.html", loginPage{Gateway: c.g.Status().Gateway, Error: msg}); err != nil {
		c.log.Error("console: rendering the sign-in page", "error", err)
	}
}

// serveLogin signs a person in with a token whose principal has role admin or viewer.
func (c *Console) serveLogin(w http.ResponseWriter, r *http.Request) {
	if !c.sameOrigin(r) {
		c.renderLogin(w, http.StatusForbidden, "This sign-in does not come from a page of this console.")
		return
	}
	ip := clientIP(r)
	// An identity provider's access token may be long (identity.MaxTokenBytes is 16 KB).
	r.Body = http.MaxBytesReader(w, r.Body, 20<<10)
	token := strings.TrimSpace(r.PostFormValue("token"))
	p, until := c.g.Authenticate(r.Context(), c.creds, token)
	// The throttle slows guessers down and never keeps out a person with a valid token: bad
	// sign-ins from a shared address (a reverse proxy) must not lock an operator out of HALT.
	// Tokens are long random strings, so checking one while throttled teaches a guesser nothing.
	valid := p != nil && (p.HasRole(config.RoleAdmin) || p.HasRole(config.RoleViewer))
	if ok, retry := c.signins.allow(ip); !ok && !valid {
		c.log.Warn("console: sign-in throttled after too many refused attempts", "remote", ip)
		w.Header().Set("Retry-After", fmt.Sprint(int(retry.Seconds())+1))
		c.renderLogin(w, http.StatusTooManyRequests, fmt.Sprintf("Too many refused sign-ins: try again in %d s.", int(retry.Seconds())+1))
		return
	}
	switch {
	case p == nil:
		c.refuseSignin(w, r, ip, "", "the token is not valid for this gateway")
		return
	case !p.HasRole(config.RoleAdmin) && !p.HasRole(config.RoleViewer):
		c.refuseSignin(w, r, ip, p.ID, fmt.Sprintf("principal %s has neither role %s nor %s", p.ID, config.RoleAdmin, config.RoleViewer))
		return
	}
	ss := c.sessions.start(*p, until)
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: ss.id, Path: "/console", Expires: ss.expires, MaxAge: int(time.Until(ss.expires).Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	c.audit(r, store.Record{Type: store.RecordOperator, Action: "console_signin", Principal: p.ID, Outcome: "ok",
		Detail: map[string]any{"remote": ip, "role": ss.role()}})
	c.log.Info("console: signed in", "principal", p.ID, "role", ss.role(), "remote", ip)
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

func (c *Console) refuseSignin(w http.ResponseWriter, r *http.Request, ip, principal, why string) {
	c.signins.failed(ip)
	c.audit(r, store.Record{Type: store.RecordOperator, Action: "console_signin", Principal: principal, Outcome: "refused", Reason: why,
		Detail: map[string]any{"remote": ip}})
	c.log.Warn("console: sign-in refused", "remote", ip, "reason", why)
	c.renderLogin(w, http.StatusUnauthorized, "Sign-in refused: use a token of auth.tokens, or an access token of the identity provider, with role admin or viewer.")
}

func (c *Console) serveLogout(w http.ResponseWriter, r *http.Request) {
	ss := sessionOf(r)
	c.sessions.end(ss.id)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/console", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	if r.Header.Get("X-CSRF-Token") != "" {
		writeJSON(w, http.StatusOK, resultBody{Message: "signed out"})
		return
	}
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

// audit appends rec to the audit log and waits for it to be on disk.
func (c *Console) audit(r *http.Request, rec store.Record) {
	st := c.g.Store()
	if st == nil {
		return
	}
	if _, err := st.Audit().AppendSync(context.WithoutCancel(r.Context()), rec); err != nil {
		c.log.Error("console: audit record not written yet", "action", rec.Action, "error", err)
	}
}
