package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/mcp-gateway/mcp-gateway/guards"
	"github.com/mcp-gateway/mcp-gateway/internal/printable"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// PinStatus is one pinned tool as GET /admin/pins and `mcp-gateway pins list` report it, or
// (from a running gateway) an item that tool_definition guards withhold, pinned or not.
type PinStatus struct {
	// Kind is tool, or for a withheld item without a pin prompt, resource or resource_template.
	Kind   string `json:"kind"`
	Server string `json:"server"`
	// Tool is the upstream's name for the tool (a resource's URI, a template's URI template);
	// "" when a guard flagged that name itself.
	Tool   string    `json:"tool"`
	Digest string    `json:"digest,omitempty"`
	Pinned time.Time `json:"pinned,omitzero"`
	// Pending is the digest of a changed definition waiting for acceptance, first seen at
	// Changed; Changes names what differs from the pinned one.
	Pending string    `json:"pending,omitempty"`
	Changed time.Time `json:"changed,omitzero"`
	Changes []string  `json:"changes,omitempty"`
	// Quarantined: the tool has a pending change, so it is kept out of the list and refused
	// for as long as its upstream serves the changed definition; or it is withheld.
	Quarantined       bool            `json:"quarantined"`
	Definition        json.RawMessage `json:"definition,omitempty"`
	PendingDefinition json.RawMessage `json:"pending_definition,omitempty"`
	// Withheld are the tool_definition findings (guard, category, path; never the text) that
	// keep the item out, with the reason; `pins accept` does not release it: its upstream must
	// change it, or an operator the guards.
	Withheld       []guards.Finding `json:"withheld,omitempty"`
	WithheldReason string           `json:"withheld_reason,omitempty"`
}

// PinStatuses reports pins, in their order.
func PinStatuses(pins []store.Pin) []PinStatus {
	out := make([]PinStatus, 0, len(pins))
	for _, p := range pins {
		s := PinStatus{
			Kind: KindTool, Server: p.Server, Tool: p.Tool, Digest: p.Digest, Pinned: p.Pinned, Definition: p.Definition,
			Pending: p.Pending, Quarantined: p.Pending != "",
		}
		if p.Pending != "" {
			s.Changed, s.PendingDefinition = p.Changed, p.PendingDefinition
			s.Changes = DefinitionChanges(p.Definition, p.PendingDefinition)
		}
		out = append(out, s)
	}
	return out
}

// WithWithheld adds to list what tool_definition guards withhold: on the pin of a withheld
// tool, or as an entry of its own.
func WithWithheld(list []PinStatus, withheld []Withheld) []PinStatus {
	for _, w := range withheld {
		i := slices.IndexFunc(list, func(p PinStatus) bool {
			return w.Kind == KindTool && w.Name != "" && p.Kind == KindTool && p.Server == w.Server && p.Tool == w.Name
		})
		if i < 0 {
			list = append(list, PinStatus{Kind: w.Kind, Server: w.Server, Tool: w.Name})
			i = len(list) - 1
		}
		list[i].Quarantined = true
		list[i].Withheld, list[i].WithheldReason = w.Findings, w.Reason
	}
	return list
}

// AcceptRequest is the body of POST /admin/pins/{server}/accept. Tool "" accepts every pending
// change of the server.
type AcceptRequest struct {
	Tool     string `json:"tool"`
	Operator string `json:"operator"`
	// Digest, when given, is the pending definition the operator reviewed (pins list shows it):
	// one that changed again since is refused with 409.
	Digest string `json:"digest,omitempty"`
}

// registerPinRoutes serves GET /admin/pins and POST /admin/pins/{server}/accept.
func (g *Gateway) registerPinRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/pins", func(w http.ResponseWriter, r *http.Request) {
		pins, err := g.opts.Store.ListPins("")
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, WithWithheld(PinStatuses(pins), g.withheld.all()))
	})
	mux.HandleFunc("POST /admin/pins/{server}/accept", func(w http.ResponseWriter, r *http.Request) {
		var req AcceptRequest
		if r.ContentLength != 0 {
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
				writeError(w, http.StatusBadRequest, `the body must be JSON: {"tool": "upstream tool name, or empty for every changed tool of the server", "operator": "who"}`)
				return
			}
		}
		req.Operator = operatorOf(r, req.Operator)
		accepted, err := g.AcceptReviewedPins(r.PathValue("server"), req.Tool, req.Digest, printable.Text(req.Operator))
		switch {
		case errors.Is(err, store.ErrPendingChanged):
			writeError(w, http.StatusConflict, err.Error())
		case len(accepted) == 0 && (errors.Is(err, ErrNothingPending) || errors.Is(err, store.ErrNotFound)):
			writeError(w, http.StatusNotFound, err.Error())
		case err != nil:
			writeError(w, http.StatusInternalServerError, err.Error())
		default:
			writeJSON(w, http.StatusOK, PinStatuses(accepted))
		}
	})
}
