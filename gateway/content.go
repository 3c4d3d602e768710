package gateway

//lint:file-ignore SA1019 sampling and elicitation are deprecated from MCP 2026-07-28 on but still part of the protocol, and screening them for clients is what this file does.

// Upstream content (SPEC.md §15): everything an upstream puts in front of a model or a user
// outside a tool result passes the upstream_content guards — the text of resource contents
// (and of blobs with a textual MIME type), prompt messages, completion values, and the
// sampling and elicitation requests an upstream sends to the client. One stage on purpose: an
// operator wants one place that covers all of it, narrowed per server with where.servers.
// where.tools matches the item: a resource's URI, a prompt's public name, a completion's
// reference (prompt name or template URI), or the method of a request from the server
// (sampling/createMessage, elicitation/create).
//
// Redaction works as on tool results. A block (or an escalate: there is no call an operator
// could approve) refuses the content: the client gets a JSON-RPC error naming the guard and
// the category, never the content; a sampling or elicitation request is refused back to the
// upstream, so the client never sees it. Findings are counted under stage upstream_content
// and logged with their paths.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/guards"
	"github.com/mcp-gateway/mcp-gateway/upstream"
)

// CodeContentBlocked is the JSON-RPC error code of upstream content a guard blocked (in the
// range JSON-RPC leaves to servers). Its data is {"kind": "guard_blocked", "guard", "category"}.
const CodeContentBlocked = -32098

// contentGuards is the upstream_content set in force; nil when none.
func (g *Gateway) contentGuards() *guards.Set {
	if sets := g.live.Load().guards; sets != nil {
		return sets.UpstreamContent
	}
	return nil
}

// screenContent runs the upstream_content guards over the texts collect gives (their setters
// write redactions into the caller's copy), counts and logs the findings, labels the session,
// and returns an error for whoever would receive blocked content. what names the content for
// messages ("the contents of resource cell://log").
func (g *Gateway) screenContent(ctx context.Context, ss *mcp.ServerSession, server, item, what string, collect func(hide map[string]bool) []defText) error {
	set := g.contentGuards()
	if set.Empty() {
		return nil
	}
	s := screenTexts(ctx, set, server, item, "", collect)
	if g.guardMetrics != nil {
		g.guardMetrics.Observe(guards.StageUpstreamContent, s.res)
	}
	if ss != nil {
		for _, l := range s.res.Labels {
			g.sessions.label(ss.ID(), l)
		}
	}
	if len(s.res.Findings) > 0 || len(s.res.Errors) > 0 {
		outcome, level := "redacted", slog.LevelInfo
		switch {
		case s.withheld:
			outcome, level = "blocked", slog.LevelWarn
		case s.res.Action == guards.ActionNone:
			outcome = "passed"
		}
		g.log.Log(ctx, level, "upstream content guard findings", "server", server, "content", what, "outcome", outcome,
			"findings", findingSummary(s.res.Findings), "guard_errors", len(s.res.Errors))
	}
	if !s.withheld {
		return nil
	}
	reason := s.reason
	if s.res.Action == guards.ActionEscalate {
		reason += "; upstream content cannot wait for an operator's approval, so it was blocked"
	}
	guard, category := "", ""
	if f := blockingFinding(s.res); f != nil {
		guard, category = f.Guard, f.Category
	}
	data, _ := json.Marshal(map[string]string{"kind": "guard_blocked", "guard": guard, "category": category})
	return &jsonrpc.Error{Code: CodeContentBlocked, Data: data, Message: fmt.Sprintf(
		"the gateway withheld %s from server %s: %s. Nothing of it was passed on; the gateway's log names the finding, and an operator must review the server",
		what, server, reason)}
}

// blockingFinding is the enforced finding that decided a block: the first that blocks or
// escalates, else the first redaction that could not be applied; nil when a guard failed
// closed instead.
func blockingFinding(r guards.Result) *guards.Finding {
	var redact *guards.Finding
	for i := range r.Findings {
		f := &r.Findings[i]
		if f.Mode != guards.ModeEnforce {
			continue
		}
		if f.Action == guards.ActionBlock || f.Action == guards.ActionEscalate {
			return f
		}
		if redact == nil && f.Action == guards.ActionRedact {
			redact = f
		}
	}
	return redact
}

// findingSummary spells findings for a log line: guard, category, action and path, never text.
func findingSummary(fs []guards.Finding) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s: %s at %s (%s, %s)", f.Guard, f.Category, f.Path, f.Action, f.Mode))
	}
	return out
}

// textual reports whether a blob of this MIME type holds text worth screening.
func textual(mimeType string) bool {
	mt, _, err := mime.ParseMediaType(mimeType)
	if err != nil {
		return false
	}
	switch {
	case strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/yaml", "application/x-yaml", "application/javascript", "application/toml":
		return true
	}
	return false
}

// resourceContentTexts collects the texts of resource contents; contents is the caller's copy,
// whose entries are replaced when a redaction writes to them.
func resourceContentTexts(w *defWalker, prefix string, contents []*mcp.ResourceContents) {
	for i, c := range contents {
		if c == nil {
			continue
		}
		at := index(prefix, i)
		w.add(at+".text", c.Text, true, func(s string) {
			cp := *contents[i]
			cp.Text = s
			contents[i] = &cp
		})
		if len(c.Blob) > 0 && textual(c.MIMEType) && utf8.Valid(c.Blob) {
			w.add(at+".blob", string(c.Blob), true, func(s string) {
				cp := *contents[i]
				cp.Blob = []byte(s)
				contents[i] = &cp
			})
		}
	}
}

// contentTexts collects the texts of content blocks (prompt messages, sampling messages); the
// setters replace blocks in the caller's slice.
func contentTexts(w *defWalker, at string, blocks []mcp.Content) {
	for j, b := range blocks {
		bt := at
		if len(blocks) > 1 || at == "" {
			bt = index(at, j)
		}
		switch c := b.(type) {
		case *mcp.TextContent:
			w.add(bt+".text", c.Text, true, func(s string) {
				cp := *c
				cp.Text = s
				blocks[j] = &cp
			})
		case *mcp.EmbeddedResource:
			// Its text; a blob inside a message is left as it is, like an image.
			if r := c.Resource; r != nil {
				w.add(bt+".resource.text", r.Text, true, func(s string) {
					rc := *r
					rc.Text = s
					cp := *c
					cp.Resource = &rc
					blocks[j] = &cp
				})
			}
		case *mcp.ResourceLink:
			w.add(bt+".title", c.Title, true, func(s string) {
				cp := *c
				cp.Title = s
				blocks[j] = &cp
				c = &cp
			})
			w.add(bt+".description", c.Description, true, func(s string) {
				cp := *c
				cp.Description = s
				blocks[j] = &cp
				c = &cp
			})
		case *mcp.ToolResultContent:
			inner := append([]mcp.Content(nil), c.Content...)
			before := len(w.texts)
			contentTexts(w, bt+".content", inner)
			for k := before; k < len(w.texts); k++ {
				if write := w.texts[k].set; write != nil {
					w.texts[k].set = func(s string) {
						write(s)
						cp := *c
						cp.Content = inner
						blocks[j] = &cp
						c = &cp
					}
				}
			}
		}
	}
}

// screenResource screens what a resources/read returned; contents are replaced by the
// redacted ones.
func (g *Gateway) screenResource(ctx context.Context, ss *mcp.ServerSession, server, uri string, res *mcp.ReadResourceResult) error {
	if g.contentGuards().Empty() {
		return nil
	}
	var contents []*mcp.ResourceContents
	err := g.screenContent(ctx, ss, server, uri, "the contents of resource "+uri, func(map[string]bool) []defText {
		contents = append([]*mcp.ResourceContents(nil), res.Contents...)
		w := &defWalker{}
		resourceContentTexts(w, "contents", contents)
		return w.texts
	})
	if err == nil {
		res.Contents = contents
	}
	return err
}

// screenPrompt screens what a prompts/get returned: its description and messages.
func (g *Gateway) screenPrompt(ctx context.Context, ss *mcp.ServerSession, server, public string, res *mcp.GetPromptResult) error {
	if g.contentGuards().Empty() {
		return nil
	}
	var msgs []*mcp.PromptMessage
	desc := res.Description
	err := g.screenContent(ctx, ss, server, public, "the messages of prompt "+public, func(map[string]bool) []defText {
		desc = res.Description
		msgs = make([]*mcp.PromptMessage, len(res.Messages))
		w := &defWalker{}
		w.add("description", desc, true, func(s string) { desc = s })
		for i, m := range res.Messages {
			if m == nil {
				continue
			}
			c := *m
			msgs[i] = &c
			block := []mcp.Content{c.Content}
			before := len(w.texts)
			contentTexts(w, index("messages", i)+".content", block)
			for k := before; k < len(w.texts); k++ {
				if write := w.texts[k].set; write != nil {
					w.texts[k].set = func(s string) { write(s); c.Content = block[0] }
				}
			}
		}
		return w.texts
	})
	if err == nil {
		res.Description, res.Messages = desc, msgs
	}
	return err
}

// screenCompletion screens the values of a completion/complete result.
func (g *Gateway) screenCompletion(ctx context.Context, ss *mcp.ServerSession, server, ref string, res *mcp.CompleteResult) error {
	if g.contentGuards().Empty() {
		return nil
	}
	var values []string
	err := g.screenContent(ctx, ss, server, ref, "the completions for "+ref, func(map[string]bool) []defText {
		values = append([]string(nil), res.Completion.Values...)
		w := &defWalker{}
		for i, v := range values {
			w.add(index("completion.values", i), v, true, func(s string) { values[i] = s })
		}
		return w.texts
	})
	if err == nil {
		res.Completion.Values = values
	}
	return err
}

// screenRequest is the upstream.Origin hook for the requests an upstream sends to the client
// of session ss: a sampling request's system prompt, messages and offered tools, an
// elicitation's message, URL and requested schema. It returns the request to pass on
// (redacted), or the error the upstream gets back instead: the client never sees a blocked
// request.
func (g *Gateway) screenRequest(ss *mcp.ServerSession) func(ctx context.Context, server, method string, req mcp.InputRequest) (mcp.InputRequest, error) {
	return func(ctx context.Context, server, method string, req mcp.InputRequest) (mcp.InputRequest, error) {
		if u := g.ups.Get(server); u != nil {
			g.labelUntrusted(u, ss) // the client's model reads it as it reads a result
		}
		if g.contentGuards().Empty() {
			return req, nil
		}
		switch p := req.(type) {
		case *mcp.CreateMessageWithToolsParams:
			var c mcp.CreateMessageWithToolsParams
			var tools []func()
			unreadable := false
			err := g.screenContent(ctx, ss, server, method, "a sampling request", func(hide map[string]bool) []defText {
				c = *p
				c.Messages = make([]*mcp.SamplingMessageV2, len(p.Messages))
				c.Tools = append([]*mcp.Tool(nil), p.Tools...)
				tools, unreadable = tools[:0], false
				w := &defWalker{hide: hide}
				w.add("systemPrompt", c.SystemPrompt, true, func(s string) { c.SystemPrompt = s })
				for i, m := range p.Messages {
					if m == nil {
						continue
					}
					mc := *m
					mc.Content = append([]mcp.Content(nil), m.Content...)
					c.Messages[i] = &mc
					contentTexts(w, index("messages", i)+".content", mc.Content)
				}
				for i, t := range c.Tools {
					if t == nil {
						continue
					}
					prefix := index("tools", i) + "."
					sub := map[string]bool{}
					for k := range hide {
						if rest, ok := strings.CutPrefix(k, prefix); ok {
							sub[rest] = true
						}
					}
					texts, build, err := toolTexts(t, sub)
					if err != nil {
						unreadable = true
						continue
					}
					for _, tt := range texts {
						tt.path = prefix + tt.path
						w.texts = append(w.texts, tt)
					}
					tools = append(tools, func() { c.Tools[i] = build() })
				}
				return w.texts
			})
			if err != nil {
				return nil, err
			}
			if unreadable {
				// What cannot be screened is not passed on (fail closed).
				return nil, fmt.Errorf("the sampling request offers a tool whose schema the gateway cannot read to screen it, so it was not passed on")
			}
			for _, rebuild := range tools {
				rebuild()
			}
			if len(c.Tools) == 0 {
				c.Tools = p.Tools
			}
			return &c, nil
		case *mcp.ElicitParams:
			c := *p
			var schema any
			err := g.screenContent(ctx, ss, server, method, "an elicitation request", func(hide map[string]bool) []defText {
				c = *p
				w := &defWalker{hide: hide}
				w.add("message", c.Message, true, func(s string) { c.Message = s })
				w.add("url", c.URL, false, nil)
				if p.RequestedSchema != nil {
					var err error
					if schema, err = canonicalValue(p.RequestedSchema); err == nil {
						w.schema("requestedSchema", schema)
					}
				}
				return w.texts
			})
			if err != nil {
				return nil, err
			}
			if schema != nil {
				c.RequestedSchema = schema
			}
			return &c, nil
		}
		return req, nil
	}
}

// screenInputRequests screens the input requests an upstream of MCP 2026-07-28 returns in a
// result (sampling, elicitation) before the client sees them, as screenRequest screens those an
// older upstream sends mid-call. It returns the requests to pass on, or the refusal: then the
// client gets none of them, and the upstream's multi-round-trip request simply ends, since
// the protocol has no answer that tells a server its request was refused.
func (g *Gateway) screenInputRequests(ctx context.Context, ss *mcp.ServerSession, server string, reqs mcp.InputRequestMap) (mcp.InputRequestMap, error) {
	if len(reqs) == 0 {
		return reqs, nil
	}
	screen := g.screenRequest(ss)
	ids := sortedIDs(reqs)
	out := make(mcp.InputRequestMap, len(reqs))
	for _, id := range ids {
		method := "sampling/createMessage"
		if _, ok := reqs[id].(*mcp.ElicitParams); ok {
			method = "elicitation/create"
		}
		r, err := screen(ctx, server, method, reqs[id])
		if err != nil {
			return nil, err
		}
		out[id] = r
	}
	return out, nil
}

func sortedIDs(m mcp.InputRequestMap) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// screenedCallResult screens the input requests of a tool call's result; a refusal replaces the
// result with a guard_blocked failure.
func (g *Gateway) screenedCallResult(ctx context.Context, ss *mcp.ServerSession, name string, res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || len(res.InputRequests) == 0 {
		return res
	}
	server := ""
	if t, ok := g.Resolve(name); ok {
		server = t.Server
	}
	reqs, err := g.screenInputRequests(ctx, ss, server, res.InputRequests)
	if err != nil {
		return governor.Failure(governor.KindGuardBlocked, fmt.Sprintf(
			"%s asked the client for input, and %v. The call ended there; do not repeat it expecting another answer", name, err)).Result()
	}
	c := *res
	c.InputRequests = reqs
	return &c
}

// screenOrigin gives o the hook that screens what its upstream asks the client.
func (g *Gateway) screenOrigin(o *upstream.Origin) {
	o.Screen = g.screenRequest(o.Session)
}
