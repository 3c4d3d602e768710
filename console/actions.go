package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// The console's actions. Each calls the gateway method the admin API calls, as the signed-in
// principal, so that it is checked and audited the same way. They run detached from the
// request: a person who closes the tablet mid-halt must not cancel the halt.

// actionRequest is the JSON body of every action; each reads what it needs.
type actionRequest struct {
	Reason string `json:"reason"`
	Tool   string `json:"tool"`
	// Digest is the pending definition the page showed, for accept.
	Digest string `json:"digest"`
}

func readAction(w http.ResponseWriter, r *http.Request) (actionRequest, bool) {
	var req actionRequest
	if r.ContentLength == 0 {
		return req, true
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: `the body must be JSON: {"reason": "…"}`})
		return req, false
	}
	req.Reason = strings.TrimSpace(req.Reason)
	return req, true
}

func detached(r *http.Request) context.Context { return context.WithoutCancel(r.Context()) }

func (c *Console) serveHalt(w http.ResponseWriter, r *http.Request) {
	req, ok := readAction(w, r)
	if !ok {
		return
	}
	who := sessionOf(r).principal.ID
	rep, err := c.g.Halt(detached(r), who, req.Reason)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return
	}
	msg := fmt.Sprintf("HALTED %d physical server(s); %d running call(s) cancelled", len(rep.Servers), len(rep.Cancelled))
	for _, s := range rep.Servers {
		if s.Stop.Tool != "" {
			msg += fmt.Sprintf("; %s: stop tool %s %s", s.Server, s.Stop.Tool, s.Stop.Status)
		}
	}
	writeJSON(w, http.StatusOK, resultBody{Message: msg, Detail: rep})
}

func (c *Console) serveLock(w http.ResponseWriter, r *http.Request) {
	req, ok := readAction(w, r)
	if !ok {
		return
	}
	server := r.PathValue("server")
	res, err := c.g.Lock(detached(r), server, sessionOf(r).principal.ID, req.Reason)
	switch {
	case errors.Is(err, gateway.ErrUnknownServer):
		writeJSON(w, http.StatusNotFound, errorBody{Error: err.Error()})
	case err != nil:
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
	case res.AlreadyLocked:
		writeJSON(w, http.StatusOK, resultBody{Message: fmt.Sprintf("%s was already locked: %s", server, lockoutCause(res.Lockout)), Detail: res})
	default:
		writeJSON(w, http.StatusOK, resultBody{Message: server + " is locked", Detail: res})
	}
}

func (c *Console) serveUnlock(w http.ResponseWriter, r *http.Request) {
	req, ok := readAction(w, r)
	if !ok {
		return
	}
	server := r.PathValue("server")
	res, err := c.g.Unlock(detached(r), server, sessionOf(r).principal.ID, req.Reason)
	switch {
	case errors.Is(err, gateway.ErrNotLocked):
		writeJSON(w, http.StatusNotFound, errorBody{Error: err.Error()})
	case err != nil:
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
	default:
		msg := fmt.Sprintf("%s unlocked (it was: %s)", server, lockoutCause(res.Cleared))
		if res.RestartError != "" {
			msg += "; restarting it failed: " + res.RestartError
		}
		writeJSON(w, http.StatusOK, resultBody{Message: msg, Detail: res})
	}
}

func (c *Console) serveDecide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, ok := readAction(w, r)
		if !ok {
			return
		}
		if !approve && req.Reason == "" {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: "a reason is required to deny: the caller is told it"})
			return
		}
		id := r.PathValue("id")
		a, err := c.g.DecideApproval(detached(r), id, approve, sessionOf(r).principal.ID, req.Reason)
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeJSON(w, http.StatusNotFound, errorBody{Error: err.Error()})
		case errors.Is(err, store.ErrAlreadyDecided):
			writeJSON(w, http.StatusConflict, errorBody{Error: err.Error()})
		case errors.Is(err, store.ErrExpired):
			writeJSON(w, http.StatusGone, errorBody{Error: err.Error()})
		case err != nil:
			writeJSON(w, http.StatusInternalServerError, errorBody{Error: err.Error()})
		default:
			writeJSON(w, http.StatusOK, resultBody{Message: fmt.Sprintf("%s: %s %s", a.Tool, a.ID, a.State), Detail: a})
		}
	}
}

func (c *Console) serveAcceptPins(w http.ResponseWriter, r *http.Request) {
	req, ok := readAction(w, r)
	if !ok {
		return
	}
	server := r.PathValue("server")
	// Exactly what the page showed: a definition that changed again since is refused.
	accepted, err := c.g.AcceptReviewedPins(server, req.Tool, req.Digest, sessionOf(r).principal.ID)
	switch {
	case errors.Is(err, store.ErrPendingChanged):
		writeJSON(w, http.StatusConflict, errorBody{Error: err.Error()})
	case len(accepted) == 0 && (errors.Is(err, gateway.ErrNothingPending) || errors.Is(err, store.ErrNotFound)):
		writeJSON(w, http.StatusNotFound, errorBody{Error: err.Error()})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: err.Error()})
	default:
		var names []string
		for _, p := range accepted {
			names = append(names, p.Tool)
		}
		writeJSON(w, http.StatusOK, resultBody{Message: fmt.Sprintf("accepted the new definition of %s/%s", server, strings.Join(names, ", ")),
			Detail: gateway.PinStatuses(accepted)})
	}
}

func (c *Console) serveReload(w http.ResponseWriter, r *http.Request) {
	rep, err := c.g.ReloadFile(detached(r), sessionOf(r).principal.ID)
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Error: err.Error()})
		return
	}
	msg := fmt.Sprintf("config reloaded from %s: %d tools listed", rep.Config, rep.Tools)
	if len(rep.Restarted) > 0 {
		msg += "; restarted " + strings.Join(rep.Restarted, ", ")
	}
	if len(rep.NeedsRestart) > 0 {
		msg += "; these settings apply only when the gateway restarts: " + strings.Join(rep.NeedsRestart, ", ")
	}
	for _, s := range append(rep.Warnings, rep.NotReady...) {
		msg += "; " + s
	}
	writeJSON(w, http.StatusOK, resultBody{Message: msg, Detail: rep})
}
