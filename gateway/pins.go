package gateway

// Tool pinning (SPEC.md §5, rug-pull protection). The first time the gateway sees a tool, the
// digest of what a model reads of it (name, description, input and output schema, exactly as the
// upstream listed them) is stored in the state file. When an upstream later lists a different
// definition, that tool is kept out of the list and its calls are refused with
// tool_definition_changed until an operator accepts the change: a trusted server must not be
// able to quietly rewrite the instructions a model follows.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// ErrNothingPending: no pinned tool (of the server, or the one named) has a definition change
// waiting for acceptance.
var ErrNothingPending = errors.New("no pending tool definition change")

// applyPins enforces tool pinning on a freshly built catalog: it pins tools seen for the first
// time and quarantines listed tools whose definition differs from their pin. It reads the pins
// with one ListPins per server and writes only when a pin is new or its pending change is.
func (g *Gateway) applyPins(cat *Catalog) []Problem {
	st := g.opts.Store
	if st == nil {
		return nil
	}
	// Quarantine edits the listed slice in place, so group the tools before touching any.
	var servers []string
	byServer := map[string][]*governor.Tool{}
	for _, t := range cat.Tools() {
		if _, seen := byServer[t.Server]; !seen {
			servers = append(servers, t.Server)
		}
		byServer[t.Server] = append(byServer[t.Server], t)
	}
	var problems []Problem
	for _, server := range servers {
		tools := byServer[server]
		pins, err := st.ListPins(server)
		if err != nil {
			// Without the pins a changed definition cannot be told apart: fail closed.
			for _, t := range tools {
				cat.Quarantine(t.Public, fmt.Sprintf(
					"Tool %s is not served: the gateway cannot read its pinned definition from the state file, so it cannot tell whether the upstream changed it. An operator must check the gateway's log.",
					t.Public))
			}
			problems = append(problems, Problem{Server: server, Msg: fmt.Sprintf(
				"server %s: its tools are quarantined because their pins cannot be read: %v", server, err)})
			continue
		}
		pinned := make(map[string]store.Pin, len(pins))
		for _, p := range pins {
			pinned[p.Tool] = p
		}
		for _, t := range tools {
			p, found := pinned[t.Upstream]
			if msg := g.checkPin(cat, t, p, found); msg != "" {
				problems = append(problems, Problem{Server: server, Tool: t.Upstream, Msg: msg})
			}
		}
	}
	return problems
}

// checkPin compares one listed tool with its pin (found false: none yet) and returns a message
// for the log when the tool is quarantined or its pin could not be stored.
func (g *Gateway) checkPin(cat *Catalog, t *governor.Tool, p store.Pin, found bool) string {
	st := g.opts.Store
	def, err := canonicalDefinition(t.UpstreamDefinition)
	if err != nil {
		cat.Quarantine(t.Public, fmt.Sprintf(
			"Tool %s is not served: its definition from server %s cannot be digested for pinning.", t.Public, t.Server))
		return fmt.Sprintf("server %s: tool %s is quarantined: its definition cannot be digested for pinning: %v", t.Server, t.Upstream, err)
	}
	digest := digestOf(def)
	now := time.Now().UTC()
	ann, err := json.Marshal(t.UpstreamDefinition.Annotations)
	if err != nil {
		ann = nil // unknown, as in a pin stored before annotations were kept
	}
	switch {
	case !found:
		if err := st.PutPin(store.Pin{Server: t.Server, Tool: t.Upstream, Digest: digest, Definition: def, Pinned: now, Annotations: ann}); err != nil {
			// An unstored first pin would let the next start pin whatever is listed then.
			cat.Quarantine(t.Public, fmt.Sprintf(
				"Tool %s is not served: the gateway cannot pin its definition in the state file. An operator must check the gateway's log.", t.Public))
			return fmt.Sprintf("server %s: tool %s is quarantined because its first pin cannot be stored: %v", t.Server, t.Upstream, err)
		}
		g.log.Debug("tool pinned at first discovery", "server", t.Server, "tool", t.Upstream, "digest", digest)
		return ""
	case p.Digest == digest:
		if p.Pending == "" {
			return g.keepAnnotations(p, ann)
		}
		// The upstream went back to the pinned definition: the change is no longer pending.
		p.Pending, p.PendingDefinition, p.Changed, p.Annotations = "", nil, time.Time{}, ann
		if err := st.PutPin(p); err != nil {
			return fmt.Sprintf("server %s: tool %s is back to its pinned definition, but clearing its pending change failed: %v", t.Server, t.Upstream, err)
		}
		g.log.Info("tool definition is back to the pinned one; its pending change is dropped", "server", t.Server, "tool", t.Upstream)
		return ""
	}
	parts := DefinitionChanges(p.Definition, def)
	cat.Quarantine(t.Public, fmt.Sprintf(
		"The definition of tool %s changed on server %s since it was pinned (%s), so the gateway keeps it out of the tool list and does not call it: "+
			"a changed tool definition can change what a model does. An operator must review the change with `%s` "+
			"and accept it with `%s`. Until then, use the listed tools.",
		t.Public, t.Server, describeChanges(parts), pastable.Command("pins", "list"), pastable.Command("pins", "accept", t.Server+"/"+t.Upstream)))
	msg := fmt.Sprintf("server %s: tool %s is quarantined: %s since it was pinned at %s; review with `%s`, then accept with `%s`",
		t.Server, t.Upstream, describeChanges(parts), p.Pinned.Format(time.RFC3339), pastable.Command("pins", "list"), pastable.Command("pins", "accept", t.Server+"/"+t.Upstream))
	if p.Pending != digest {
		p.Pending, p.PendingDefinition, p.Changed, p.Annotations = digest, def, now, ann
		if err := st.PutPin(p); err != nil {
			msg += fmt.Sprintf("; recording the pending change failed, so it cannot be accepted yet: %v", err)
		}
	} else if m := g.keepAnnotations(p, ann); m != "" {
		msg += "; " + m
	}
	return msg
}

// keepAnnotations stores the annotations a server now lists for a pinned tool, when they are
// not the ones on its pin, and returns a message for the log when that fails. The tool is served
// either way: annotations are not pinned.
func (g *Gateway) keepAnnotations(p store.Pin, ann json.RawMessage) string {
	if ann == nil || bytes.Equal(p.Annotations, ann) {
		return ""
	}
	p.Annotations = ann
	if err := g.opts.Store.PutPin(p); err != nil {
		return fmt.Sprintf("server %s: tool %s: its annotations could not be kept on its pin, so `mcp-gateway check` may verify allow_while_locked against older ones: %v", p.Server, p.Tool, err)
	}
	return ""
}

// pinnedDefinition is the part of a tool definition that is pinned. Its JSON is canonical: the
// fields in this order and, since the schemas are re-decoded into maps, every object's keys
// sorted, so that the order in which an upstream writes its schema does not change the digest.
type pinnedDefinition struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	InputSchema  any    `json:"inputSchema"`
	OutputSchema any    `json:"outputSchema"`
}

// canonicalDefinition is the canonical JSON of the pinned part of an upstream's definition.
func canonicalDefinition(t *mcp.Tool) (json.RawMessage, error) {
	in, err := canonicalValue(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	out, err := canonicalValue(t.OutputSchema)
	if err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	return json.Marshal(pinnedDefinition{Name: t.Name, Description: t.Description, InputSchema: in, OutputSchema: out})
}

// canonicalValue round-trips v through JSON into plain maps, slices and numbers kept as written
// (json.Number), whose encoding sorts object keys.
func canonicalValue(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

func digestOf(def json.RawMessage) string {
	sum := sha256.Sum256(def)
	return hex.EncodeToString(sum[:])
}

// DefinitionChanges names the parts that differ between two pinned definitions: "name",
// "description", "input schema", "output schema". A definition that cannot be read counts as
// changed as a whole ("definition").
func DefinitionChanges(old, new json.RawMessage) []string {
	type parts struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
	}
	var a, b parts
	if json.Unmarshal(old, &a) != nil || json.Unmarshal(new, &b) != nil {
		return []string{"definition"}
	}
	var changed []string
	if a.Name != b.Name {
		changed = append(changed, "name")
	}
	if a.Description != b.Description {
		changed = append(changed, "description")
	}
	if !bytes.Equal(a.InputSchema, b.InputSchema) {
		changed = append(changed, "input schema")
	}
	if !bytes.Equal(a.OutputSchema, b.OutputSchema) {
		changed = append(changed, "output schema")
	}
	if len(changed) == 0 {
		// Same parts, different bytes: a pin written by another encoding of the definition.
		return []string{"definition"}
	}
	return changed
}

// describeChanges is "its description and input schema changed".
func describeChanges(parts []string) string {
	s := parts[0]
	if n := len(parts); n > 1 {
		s = strings.Join(parts[:n-1], ", ") + " and " + parts[n-1]
	}
	return "its " + s + " changed"
}

// AcceptPins makes the pending definition of a server's tool (tool "": of every tool of the
// server with one) the pinned one, audits each acceptance as an operator action, and rebuilds
// the catalog so that the accepted tools are listed again at once (clients get
// tools/list_changed). It fails with ErrNothingPending when nothing was pending; the pins
// accepted before an error are returned with it.
func (g *Gateway) AcceptPins(server, tool string, operator string) ([]store.Pin, error) {
	return g.AcceptReviewedPins(server, tool, "", operator)
}

// AcceptReviewedPins is AcceptPins of exactly the pending definition the operator reviewed
// (its digest; "" accepts whatever is pending): a definition that changed again after the
// review is refused with store.ErrPendingChanged, so that an acceptance never pins text nobody
// saw. A digest needs a tool.
func (g *Gateway) AcceptReviewedPins(server, tool, reviewed, operator string) ([]store.Pin, error) {
	if reviewed != "" && tool == "" {
		return nil, errors.New("a reviewed digest names one tool's definition: give the tool too")
	}
	st := g.opts.Store
	if st == nil {
		return nil, errors.New("this gateway runs without its state file, so it has no pins")
	}
	// Under the catalog lock, so that a rebuild running meanwhile cannot write back the pin as
	// it read it before the acceptance.
	g.syncMu.Lock()
	accepted, err := acceptPendingPins(context.Background(), st, g.config().Gateway.ToolNames, server, tool, reviewed, operator, "")
	g.syncMu.Unlock()
	for _, p := range accepted {
		g.log.Warn("changed tool definition accepted by an operator", "server", p.Server, "tool", p.Tool, "operator", operator, "digest", p.Digest)
	}
	if len(accepted) > 0 {
		g.refresh()
	}
	return accepted, err
}

// AcceptPendingPins accepts pending definition changes in st, the way [Gateway.AcceptPins] does
// but without a running gateway: for each accepted pin it commits an operator audit record
// (action pins_accept, the tool under its public name per naming, the new and previous digests,
// and via when not ""). Tools that are served again show up with the next catalog rebuild.
func AcceptPendingPins(ctx context.Context, st *store.Store, naming, server, tool, operator, via string) ([]store.Pin, error) {
	return acceptPendingPins(ctx, st, naming, server, tool, "", operator, via)
}

func acceptPendingPins(ctx context.Context, st *store.Store, naming, server, tool, reviewed, operator, via string) ([]store.Pin, error) {
	pins, err := st.ListPins(server)
	if err != nil {
		return nil, fmt.Errorf("reading the pins of server %s: %w", server, err)
	}
	previous := map[string]string{}
	var names []string
	known := false // the server has pins (and the tool, when one is named, is pinned)
	for _, p := range pins {
		if tool != "" && p.Tool != tool {
			continue
		}
		known = true
		if p.Pending != "" {
			names = append(names, p.Tool)
			previous[p.Tool] = p.Digest
		}
	}
	switch {
	case len(names) > 0:
	case !known && tool == "":
		return nil, fmt.Errorf("server %s has no pinned tools: %w", server, store.ErrNotFound)
	case !known:
		return nil, fmt.Errorf("server %s has no pinned tool %s: %w", server, tool, store.ErrNotFound)
	case tool == "":
		return nil, fmt.Errorf("server %s has no tool whose definition changed: %w", server, ErrNothingPending)
	default:
		return nil, fmt.Errorf("tool %s/%s: its definition has not changed since it was pinned: %w", server, tool, ErrNothingPending)
	}
	var accepted []store.Pin
	for _, name := range names {
		p, err := st.AcceptReviewedPin(server, name, reviewed)
		if errors.Is(err, store.ErrNoPendingChange) {
			err = fmt.Errorf("tool %s/%s: its change was accepted meanwhile: %w", server, name, ErrNothingPending)
		}
		if err != nil {
			return accepted, err
		}
		accepted = append(accepted, p)
		detail := map[string]any{"digest": p.Digest, "previous_digest": previous[name], "upstream_tool": name}
		if via != "" {
			detail["via"] = via
		}
		_, err = st.Audit().AppendSync(context.WithoutCancel(ctx), store.Record{
			Type: store.RecordOperator, Action: "pins_accept", Principal: operator,
			Server: server, Tool: PublicName(naming, server, name), Detail: detail,
		})
		if err != nil {
			return accepted, fmt.Errorf("the changed definition of %s/%s is accepted, but its audit record could not be written: %w", server, name, err)
		}
	}
	return accepted, nil
}
