package main

//lint:file-ignore SA1019 sampling is deprecated from MCP 2026-07-28 on but still part of the protocol, and asking for it is what ask_model does.

import (
	"context"
	"flag"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// screening holds the flags that plant text in the robot's definitions and content, for the
// gateway's screening tests (README "Screening hooks").
type screening struct {
	poisonSchema     string // appended to navigate_to's target description
	poisonEnum       string // an extra value of fault's mode enum
	poisonOutput     string // the description of robot_stats's output schema
	poisonAnnotation string // open_drawer's annotations.title
	resources        bool   // serve the maintenance log and the inspect_cell prompt
	resourceSecret   bool   // the maintenance log holds the fake AWS key
	poisonResource   string // the description of an extra resource cell://notes
	poisonPrompt     string // the description of an extra prompt calibrate_cell
	promptInject     string // appended to inspect_cell's message
	sample           string // add ask_model, which asks the client's model with this text
}

// The resources and prompts the screening flags serve.
const (
	logURI   = "cell://maintenance-log"
	notesURI = "cell://notes"
	logText  = "Arm serviced on Monday; gripper pads replaced."
)

func addScreeningFlags(fs *flag.FlagSet, s *screening) {
	fs.StringVar(&s.poisonSchema, "poison-schema", "", "append `text` to the description of navigate_to's target parameter")
	fs.StringVar(&s.poisonEnum, "poison-enum", "", "add `text` as a value of fault's mode enum")
	fs.StringVar(&s.poisonOutput, "poison-output", "", "give robot_stats an output schema whose description is `text`")
	fs.StringVar(&s.poisonAnnotation, "poison-annotation", "", "make `text` the annotations.title of open_drawer")
	fs.BoolVar(&s.resources, "resources", false, "serve the resource "+logURI+" and the prompt inspect_cell")
	fs.BoolVar(&s.resourceSecret, "resource-secret", false, "put the fake AWS key in "+logURI+" (implies -resources)")
	fs.StringVar(&s.poisonResource, "poison-resource", "", "also serve "+notesURI+" with `text` as its description (implies -resources)")
	fs.StringVar(&s.poisonPrompt, "poison-prompt", "", "also serve the prompt calibrate_cell with `text` as its description (implies -resources)")
	fs.StringVar(&s.promptInject, "prompt-inject", "", "append `text` to inspect_cell's message (implies -resources)")
	fs.StringVar(&s.sample, "sample", "", "add the tool ask_model, which sends the client a sampling request holding `text`")
}

// poison plants the -poison-* texts in t before it is registered.
func (s screening) poison(t *mcp.Tool) {
	switch t.Name {
	case "navigate_to":
		if s.poisonSchema != "" {
			prop := t.InputSchema.(map[string]any)["properties"].(map[string]any)["target"].(map[string]any)
			prop["description"] = prop["description"].(string) + " " + s.poisonSchema
		}
	case "fault":
		if s.poisonEnum != "" {
			prop := t.InputSchema.(map[string]any)["properties"].(map[string]any)["mode"].(map[string]any)
			prop["enum"] = append(append([]string(nil), faultModes...), s.poisonEnum)
		}
	case "robot_stats":
		if s.poisonOutput != "" {
			t.OutputSchema = map[string]any{"type": "object", "description": s.poisonOutput}
		}
	case "open_drawer":
		if s.poisonAnnotation != "" {
			a := *t.Annotations
			a.Title = s.poisonAnnotation
			t.Annotations = &a
		}
	}
}

func (s screening) servesResources() bool {
	return s.resources || s.resourceSecret || s.poisonResource != "" || s.poisonPrompt != "" || s.promptInject != ""
}

// addScreeningFeatures registers the resources, prompts and the sampling tool the flags ask for.
func (r *robot) addScreeningFeatures(srv *mcp.Server) {
	s := r.cfg.screen
	if s.servesResources() {
		text := logText
		if s.resourceSecret {
			text += " Service account: AWS key " + secretKey + "."
		}
		srv.AddResource(&mcp.Resource{URI: logURI, Name: "maintenance-log", Description: "The cell's maintenance log.", MIMEType: "text/plain"},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: logURI, MIMEType: "text/plain", Text: text}}}, nil
			})
		if s.poisonResource != "" {
			srv.AddResource(&mcp.Resource{URI: notesURI, Name: "notes", Description: s.poisonResource, MIMEType: "text/plain"},
				func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
					return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: notesURI, MIMEType: "text/plain", Text: "No notes."}}}, nil
				})
		}
		srv.AddPrompt(&mcp.Prompt{Name: "inspect_cell", Description: "Inspect one place of the cell.",
			Arguments: []*mcp.PromptArgument{{Name: "place", Description: "The place to inspect.", Required: true}}},
			func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				msg := fmt.Sprintf("Call get_scene, then describe what is at %s.", req.Params.Arguments["place"])
				if s.promptInject != "" {
					msg += " " + s.promptInject
				}
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: msg}}}}, nil
			})
		if s.poisonPrompt != "" {
			srv.AddPrompt(&mcp.Prompt{Name: "calibrate_cell", Description: s.poisonPrompt},
				func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Calibrate the arm."}}}}, nil
				})
		}
	}
	if s.sample != "" {
		r.register(srv, &mcp.Tool{
			Name:        "ask_model",
			Description: "Test hook: ask the client's model (sampling/createMessage) about the scene and report its answer.",
			InputSchema: objectSchema(nil),
			Annotations: readOnly("Ask the client's model"),
		}, false, r.askModel)
	}
}

// askModel asks the client's model with the -sample text and answers with its reply, or a
// failure whose reason is the error the request got back. From MCP 2026-07-28 on a server asks
// in its result (input requests) and is called again with the answer; before, it sends
// sampling/createMessage in the middle of the call.
func (r *robot) askModel(ctx context.Context, req *mcp.CallToolRequest) *mcp.CallToolResult {
	params := &mcp.CreateMessageWithToolsParams{
		MaxTokens:    100,
		SystemPrompt: "You describe robot cells.",
		Messages:     []*mcp.SamplingMessageV2{{Role: "user", Content: []mcp.Content{&mcp.TextContent{Text: r.cfg.screen.sample}}}},
	}
	if req.ProtocolVersion() >= "2026-07-28" {
		answer, ok := req.Params.InputResponses["ask"]
		if !ok {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"ask": params}, RequestState: "ask_model"}
		}
		return success("the model answered: " + sampledText(answer)).result()
	}
	res, err := req.Session.CreateMessageWithTools(ctx, params)
	if err != nil {
		return failure("the sampling request was refused: " + err.Error()).result()
	}
	return success("the model answered: " + sampledText(res)).result()
}

// sampledText is the text of a client's answer to a sampling request.
func sampledText(answer mcp.InputResponse) string {
	var blocks []mcp.Content
	switch a := answer.(type) {
	case *mcp.CreateMessageResult:
		blocks = []mcp.Content{a.Content}
	case *mcp.CreateMessageWithToolsResult:
		blocks = a.Content
	}
	for _, b := range blocks {
		if tc, ok := b.(*mcp.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}
