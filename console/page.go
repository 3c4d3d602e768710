package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// pageData is what every signed-in page renders from.
type pageData struct {
	Gateway   string
	Principal string
	Role      string
	CanAct    bool
	CanHalt   bool
	CSRF      string
	View      View
	// Live is set on the main page, whose panels the live updates replace.
	Live   bool
	Audit  *auditList
	Record *auditRecord
}

func (c *Console) pageData(ss *session) pageData {
	v := c.state.get()
	return pageData{
		Gateway: v.Status.Gateway, Principal: ss.principal.ID, Role: ss.role(),
		CanAct: ss.canAct(), CanHalt: ss.canAct() || c.viewerMayHalt, CSRF: ss.csrf, View: v,
	}
}

// servePage is the console itself, or the sign-in page.
func (c *Console) servePage(w http.ResponseWriter, r *http.Request) {
	ss := c.sessions.lookup(r)
	if ss == nil {
		c.renderLogin(w, http.StatusOK, "")
		return
	}
	d := c.pageData(ss)
	d.Live = true
	c.render(w, "console.html", d)
}

// update is one live update: the header and the main panels, rendered by the same templates
// as the page (so escaped by html/template), and the word for scripts and tests.
type update struct {
	Word   string `json:"word"`
	Header string `json:"header"`
	Main   string `json:"main"`
	At     string `json:"at"`
}

func (c *Console) update(ss *session) update {
	d := c.pageData(ss)
	d.Live = true
	return update{
		Word: d.View.Header.Word, Header: c.renderString("header", d), Main: c.renderString("live", d),
		At: c.now().UTC().Format(time.RFC3339Nano),
	}
}

// serveState answers one update: what the page polls when its event stream is down.
func (c *Console) serveState(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.update(sessionOf(r)))
}

// serveEvents streams an update whenever the header or the panels change, and a heartbeat
// every few seconds otherwise, so that the page can tell a quiet gateway from a lost one. It
// ends with the request, or when the session expires.
func (c *Console) serveEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "this connection cannot stream"})
		return
	}
	ss := sessionOf(r)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(c.pushEvery)
	defer tick.Stop()
	var last update
	lastSent := time.Time{}
	for {
		u := c.update(ss)
		now := c.now()
		switch {
		case u.Header != last.Header || u.Main != last.Main:
			b, _ := json.Marshal(u)
			if _, err := fmt.Fprintf(w, "event: state\ndata: %s\n\n", b); err != nil {
				return
			}
			last, lastSent = u, now
		case now.Sub(lastSent) >= c.heartbeatEvery:
			if _, err := fmt.Fprintf(w, "event: ping\ndata: {\"at\":%q}\n\n", u.At); err != nil {
				return
			}
			lastSent = now
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
		if c.sessions.lookup(r) == nil {
			_, _ = fmt.Fprint(w, "event: expired\ndata: {}\n\n")
			flusher.Flush()
			return
		}
	}
}

type errorBody struct {
	Error string `json:"error"`
}

type resultBody struct {
	Message string `json:"message"`
	// Detail is the gateway's own report of the action (HaltReport, ReloadReport, …).
	Detail any `json:"detail,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
