package model_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
)

// One turn of a tool loop against a Chat Completions endpoint: translate
// the call, send it, read the answer.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-request-id", "req_1")
		io.WriteString(w, `{"id":"chatcmpl-1","model":"llama3.2","choices":[{"message":{"role":"assistant",
			"tool_calls":[{"id":"call_1","type":"function","function":{"name":"robot__navigate_to","arguments":"{\"target\":\"table\"}"}}]},
			"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":120,"completion_tokens":15}}`)
	}))
	defer srv.Close()

	call := &model.Call{
		Instructions: []string{"You drive a home robot through its tools."},
		Messages:     []model.Message{{Role: model.RoleUser, Text: "Go to the table."}},
		Tools:        []model.Tool{{Name: "robot__navigate_to", InputSchema: []byte(`{"type":"object","properties":{"target":{"type":"string"}}}`)}},
		Controls:     model.Controls{Model: "llama3.2"},
	}
	body, err := model.OpenAIChatRequest(call, model.MaxTokensParam)
	if err != nil {
		panic(err)
	}
	tr := &model.Transport{BaseURL: srv.URL + "/v1", Path: "/chat/completions"}
	respBody, header, err := tr.Do(context.Background(), body)
	if err != nil {
		panic(err)
	}
	res, err := model.OpenAIChatResult(respBody, header)
	if err != nil {
		panic(err)
	}
	for _, tc := range res.ToolCalls() {
		fmt.Println(tc.Name, string(tc.Arguments), tc.ValidArguments())
	}
	fmt.Println(res.FinishReason, res.Usage.InputTokens, res.Usage.OutputTokens, res.Evidence.RequestID)
	// Output:
	// robot__navigate_to {"target":"table"} true
	// tool_calls 120 15 req_1
}
