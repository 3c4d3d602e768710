package gateway

// Built-in tools (SPEC.md §12): Go functions registered with RegisterTool. They form one more
// server of the catalog, named "builtin", and are governed exactly like upstream tools: their
// arguments are validated against the schema reflected from the Go input type, and guards,
// policies, audit and metrics apply to every call.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/invopop/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
)

// BuiltinServer is the name of the server the built-in tools form.
const BuiltinServer = "builtin"

// BuiltinTool is a Go function served as a tool. Build one with [Tool].
type BuiltinTool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments: an object.
	InputSchema map[string]any
	// Annotations are the tool's MCP hints (readOnlyHint…), which policies can match on; nil
	// means none.
	Annotations *mcp.ToolAnnotations
	// Handle runs one call with its raw arguments and returns the tool's result envelope.
	Handle func(ctx context.Context, args json.RawMessage) governor.Envelope

	err error // why the input schema could not be reflected
}

// Tool makes a built-in tool of fn. Its input schema is reflected from In, which must be a
// struct: properties from its json tags, required fields from `jsonschema:"required"` tags or
// json tags without omitempty, no other properties allowed. A call's arguments are decoded into
// an In (unknown fields refused) before fn runs; an error from fn is returned as a failure
// envelope with the error as its reason.
func Tool[In any](name, description string, fn func(ctx context.Context, in In) (governor.Envelope, error)) BuiltinTool {
	t := BuiltinTool{Name: name, Description: description}
	t.InputSchema, t.err = reflectInput[In]()
	t.Handle = func(ctx context.Context, args json.RawMessage) (env governor.Envelope) {
		var in In
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return governor.Failuref(governor.KindInvalidArguments, "the arguments of %s do not fit its input: %v", name, err)
		}
		defer func() {
			if r := recover(); r != nil {
				env = governor.Failuref(governor.KindUpstreamError, "built-in tool %s failed: %v", name, r)
			}
		}()
		env, err := fn(ctx, in)
		switch {
		case err != nil:
			return governor.Failuref(governor.KindUpstreamError, "built-in tool %s failed: %v", name, err)
		case env == nil:
			return governor.Failuref(governor.KindUpstreamError, "built-in tool %s returned no envelope", name)
		}
		return env
	}
	return t
}

// reflectInput is the input schema of a tool taking In: an object schema, inline, without
// $schema or $id.
func reflectInput[In any]() (map[string]any, error) {
	r := &jsonschema.Reflector{DoNotReference: true}
	b, err := json.Marshal(r.Reflect(new(In)))
	if err != nil {
		return nil, fmt.Errorf("its input schema cannot be encoded: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("its input schema cannot be decoded: %w", err)
	}
	delete(m, "$schema")
	delete(m, "$id")
	if m["type"] != "object" {
		var zero In
		return nil, fmt.Errorf("its input type %T is not a struct: tool arguments are a JSON object", zero)
	}
	return m, nil
}

// builtins are the tools registered with RegisterTool, in registration order.
type builtins struct {
	mu    sync.Mutex
	tools []*BuiltinTool
}

// RegisterTool adds a built-in tool to the gateway. Call it before Start. It fails when the
// config has a server named "builtin", when the name is empty or taken by another built-in tool,
// and when the tool's input schema could not be reflected.
func (g *Gateway) RegisterTool(def BuiltinTool) error {
	if def.err != nil {
		return fmt.Errorf("built-in tool %s: %w", def.Name, def.err)
	}
	if def.Name == "" {
		return errors.New("a built-in tool needs a name")
	}
	if def.Handle == nil || def.InputSchema == nil {
		return fmt.Errorf("built-in tool %s: build it with gateway.Tool", def.Name)
	}
	if s := g.config().Server(BuiltinServer); s != nil {
		return fmt.Errorf("built-in tool %s: the config has a server named %q (line %d), the name of the built-in tools' server; rename that server",
			def.Name, BuiltinServer, s.Line)
	}
	g.builtin.mu.Lock()
	defer g.builtin.mu.Unlock()
	if slices.ContainsFunc(g.builtin.tools, func(t *BuiltinTool) bool { return t.Name == def.Name }) {
		return fmt.Errorf("built-in tool %s is already registered", def.Name)
	}
	g.builtin.tools = append(g.builtin.tools, &def)
	return nil
}

// builtinSource is the catalog's source of the built-in tools, nil when there are none. A
// server named "builtin" added to the config by a reload shadows them, as a problem.
func (g *Gateway) builtinSource(cfg *config.Config) (*Source, *Problem) {
	g.builtin.mu.Lock()
	tools := slices.Clone(g.builtin.tools)
	g.builtin.mu.Unlock()
	if len(tools) == 0 {
		return nil, nil
	}
	if cfg.Server(BuiltinServer) != nil {
		return nil, &Problem{Server: BuiltinServer, Msg: fmt.Sprintf(
			"the config has a server named %q, the name of the built-in tools' server: the built-in tools are left out; rename that server", BuiltinServer)}
	}
	src := &Source{
		Server: &config.Server{
			Name:           BuiltinServer,
			CallTimeoutSec: 300,
			Contract:       config.ContractEnvelope,
			Tools:          config.Tools{Include: []string{"*"}},
		},
		Dispatcher: builtinDispatcher(tools),
	}
	for _, t := range tools {
		src.Tools = append(src.Tools, &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: cloneSchema(t.InputSchema), Annotations: t.Annotations})
	}
	return src, nil
}

// builtinDispatcher runs built-in tools in-process.
type builtinDispatcher []*BuiltinTool

func (d builtinDispatcher) Call(ctx context.Context, name string, args json.RawMessage, _ func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	for _, t := range d {
		if t.Name == name {
			return t.Handle(ctx, args).Result(), nil
		}
	}
	return nil, fmt.Errorf("no built-in tool is named %s", name)
}

// cloneSchema copies a schema so that the catalog never shares it with the registered tool.
func cloneSchema(m map[string]any) map[string]any {
	b, err := json.Marshal(m)
	if err != nil {
		return m
	}
	var c map[string]any
	if json.Unmarshal(b, &c) != nil {
		return m
	}
	return c
}
