package model

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"
)

// Model answers canonical calls. Every provider, the HTTP ones, scripted
// and mock alike, is a Model, so the loop never knows which it talks to.
type Model interface {
	// Generate returns the model's answer to c. It does not change c.
	Generate(ctx context.Context, c *Call) (*Result, error)
}

// Settings choose and configure one provider (the agent's llm section).
// Zero fields take the provider's defaults (see New).
type Settings struct {
	// Provider is one of anthropic, openai, openai.responses, openrouter,
	// deepseek, qwen, mimo, ollama, scripted or mock.
	Provider string
	// Model is used when a call names none.
	Model string
	// BaseURL overrides the provider's default endpoint.
	BaseURL string
	// APIKeyEnv names the environment variable holding the key. Keys are
	// only ever read from the environment.
	APIKeyEnv string
	// MaxTokens is the output limit when a call sets none. Anthropic needs
	// one and gets DefaultAnthropicMaxTokens when both are zero.
	MaxTokens int
	// MaxTokensParam is max_tokens (the default) or max_completion_tokens;
	// only Chat Completions providers take it.
	MaxTokensParam string
	// Temperature is the control sent when a call sets none (Messages: only
	// with Sampling); nil sends none.
	Temperature *float64
	// Timeout bounds each HTTP attempt; zero means the provider's default
	// (60s for Chat Completions and Responses, 600s for Messages).
	Timeout time.Duration
	// MaxRetries is how many times a failed request is retried; nil means
	// the provider's default (0 for Chat Completions and Responses: a
	// gateway in front owns retries; 2 for Messages), 0 none.
	MaxRetries *int
	// CostHeader is the response header a gateway reports the request's
	// cost in; empty means DefaultCostHeader, "none" reads no header. It
	// is read before Prices.
	CostHeader string
	// Prices price a request by the model that answered (else the model
	// asked for) when the provider reports no cost.
	Prices map[string]Price
	// BlockEmptyAnswers treats an answer with no text and no tool calls as
	// declined (a refusal whose signal was lost, such as a streamed refusal
	// through LiteLLM).
	BlockEmptyAnswers bool
	// Stream asks for a streamed answer (Chat Completions, Messages); the
	// text deltas are delivered to the context's chunk callback
	// (WithChunks) as they arrive, and kept in Result.Chunks.
	Stream bool
	// HoldStream delivers a streamed answer's chunks only once it has
	// finished and was not declined, so nothing of a declined answer
	// reaches the callback.
	HoldStream bool
	// Anthropic holds the settings only the Messages providers take;
	// naming one on another provider fails New, naming the provider.
	Anthropic AnthropicSettings
	// OnRetry is the transport's retry hook (Transport.OnRetry); nil
	// means none.
	OnRetry func(attempt int, err error)
	// InjectHeader is the transport's trace context hook
	// (Transport.InjectHeader); nil sends no trace context.
	InjectHeader func(ctx context.Context, h http.Header)
	// Headers are extra headers sent on every request; they replace the
	// provider's own headers of the same name. The llm section fills them
	// from headers_env (header name to environment variable) only.
	Headers map[string]string
	// Client sends the HTTP requests; nil means http.DefaultClient.
	Client *http.Client
	// Script is the scripted provider's script.
	Script *ScriptedSettings
	// ReplayPath is the mock provider's JSONL file; empty means the
	// LLM_REPLAY environment variable.
	ReplayPath string
}

// AnthropicSettings are the Messages-only settings (the reference's
// anthropic.messages). Zero values take the defaults documented per field.
type AnthropicSettings struct {
	// Thinking is "adaptive" (the default: thinking {"type":"adaptive"})
	// or "none" (the parameter is omitted).
	Thinking string
	// Effort is low, medium, high, xhigh or max (output_config.effort);
	// empty leaves the model's default.
	Effort string
	// Fallbacks is "default" (server-side refusal fallbacks, the default)
	// or "none" (turned off, for gateways that reject beta parameters).
	Fallbacks string
	// StructuredOutputs sends a call's OutputSchema as the API's structured
	// output format; otherwise the schema goes in the system prompt.
	StructuredOutputs bool
	// Sampling forwards temperature (older models only: current models
	// reject sampling parameters).
	Sampling bool
	// StreamMaxTokens is the output limit of a streamed request that sets
	// none; zero means DefaultAnthropicStreamMaxTokens.
	StreamMaxTokens int
	// Default names the alias (or model id) used when a call names no
	// model; Aliases map alias names to model ids, for calls and for the
	// llm.judge guard's model.
	Default string
	Aliases map[string]string
}

// Price is what a model costs, in USD per million tokens: Input for input
// tokens neither read from nor written to the prompt cache, CacheRead and
// CacheWrite for those that are, Output for output tokens. Zero is free; the
// llm section's cache_read and cache_write default to its input price.
type Price struct {
	Input, Output, CacheRead, CacheWrite float64
}

// DefaultCostHeader is the response header read for a request's cost when
// Settings.CostHeader is empty (LiteLLM Proxy's).
const DefaultCostHeader = "x-litellm-response-cost"

// SettingError is a problem with one setting of the llm section, so that
// check and agent can point at its line. Key is the setting's path inside
// the section ("thinking", "headers_env.Authorization", "rules[2].matches").
type SettingError struct {
	Key string
	Msg string
}

func (e *SettingError) Error() string { return e.Key + ": " + e.Msg }

// SettingErrors are every problem New found, in the order of the settings.
type SettingErrors []*SettingError

func (e SettingErrors) Error() string {
	parts := make([]string, len(e))
	for i, se := range e {
		parts[i] = se.Error()
	}
	return strings.Join(parts, "; ")
}

// DefaultAnthropicMaxTokens is the output limit sent to Anthropic, which
// requires one, when neither the call nor the settings set it (a streamed
// request: DefaultAnthropicStreamMaxTokens).
const DefaultAnthropicMaxTokens = 16000

// ReplayEnv names the variable the mock provider reads its file from when
// Settings.ReplayPath is empty.
const ReplayEnv = "LLM_REPLAY"

// wire says which translator pair a provider speaks.
type wire int

const (
	wireMessages wire = iota
	wireChat
	wireResponses
)

// providerDefaults is one row of the SPEC §12 defaults table.
type providerDefaults struct {
	wire      wire
	baseURL   string
	path      string
	keyEnv    string
	keyHeader string // empty: Authorization: Bearer
	model     string
	headers   map[string]string
	// baseURLEnv, when set, overrides baseURL unless Settings.BaseURL is set.
	baseURLEnv string
}

var providers = map[string]providerDefaults{
	"anthropic": {
		wire: wireMessages, baseURL: "https://api.anthropic.com", path: "/v1/messages",
		keyEnv: "ANTHROPIC_API_KEY", keyHeader: "x-api-key", model: "claude-opus-5-5",
		headers: map[string]string{"anthropic-version": "2023-06-01"},
	},
	"openai": {
		wire: wireChat, baseURL: "https://api.openai.com/v1", baseURLEnv: "OPENAI_BASE_URL", path: "/chat/completions",
		keyEnv: "OPENAI_API_KEY", model: "gpt-4o-mini",
	},
	"openai.responses": {
		wire: wireResponses, baseURL: "https://api.openai.com/v1", baseURLEnv: "OPENAI_BASE_URL", path: "/responses",
		keyEnv: "OPENAI_API_KEY", model: "gpt-4o-mini",
	},
	"openrouter": {
		wire: wireChat, baseURL: "https://openrouter.ai/api/v1", path: "/chat/completions",
		keyEnv: "OPENROUTER_API_KEY", model: "openai/gpt-5.5",
		headers: map[string]string{"X-Title": "mcp-gateway"},
	},
	"mimo": {
		wire: wireChat, baseURL: "https://token-plan-cn.xiaomimimo.com/v1", path: "/chat/completions",
		keyEnv: "MIMO_API_KEY", keyHeader: "api-key", model: "mimo-v2.5",
	},
	"qwen": {
		wire: wireChat, baseURL: "https://dashscope.aliyuncs.com/compatible-mode/v1", path: "/chat/completions",
		keyEnv: "DASHSCOPE_API_KEY", model: "qwen-max-latest",
	},
	"deepseek": {
		wire: wireChat, baseURL: "https://api.deepseek.com/v1", path: "/chat/completions",
		keyEnv: "DEEPSEEK_API_KEY", model: "deepseek-chat",
	},
	"ollama": {
		wire: wireChat, baseURL: "http://localhost:11434/v1", path: "/chat/completions",
		model: "llama3.2",
	},
}

// Providers returns the names New accepts, sorted.
func Providers() []string {
	names := []string{"scripted", "mock"}
	for name := range providers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// New builds the Model that s chooses, checking every setting first: the
// error lists every problem as SettingErrors, each under the setting's path
// in the llm section, so nothing is found only by the first request.
//
// An HTTP provider is its wire translator pair around a Transport, with the
// provider's default base URL, path, key variable, key header and model
// unless s overrides them: anthropic sends the key in x-api-key with
// anthropic-version 2023-06-01; openrouter sends X-Title: mcp-gateway; mimo
// sends the key in an api-key header; ollama takes no key; openai and
// openai.responses use OPENAI_BASE_URL when BaseURL is empty and it is set.
// The key itself is read when a request is made, so a missing key fails
// the first call, naming the variable. A setting the provider does not take
// (thinking on openai, max_tokens_param on anthropic) is refused, naming
// the providers that take it. Each request has a timeout (Timeout, else
// DefaultTimeout, or DefaultMessagesTimeout for anthropic).
//
// scripted needs s.Script and ignores the HTTP settings, so a configuration
// can switch to it without removing them; mock replays s.ReplayPath (or
// $LLM_REPLAY). Every Model New returns prices its answers (see
// Usage.CostSource): the cost header, else the cost the answer reports,
// else s.Prices.
func New(s Settings) (Model, error) {
	var p problems
	switch s.Provider {
	case "scripted", "mock":
		p.checkPrices(s.Prices)
		var inner Model
		if s.Provider == "scripted" {
			p.checkScript(s.Script)
			if len(p) == 0 {
				script := *s.Script
				script.HoldStream = s.HoldStream
				inner, _ = NewScripted(script) // checked above
			}
		} else {
			path := s.ReplayPath
			if path == "" {
				path = os.Getenv(ReplayEnv)
			}
			if path == "" {
				p.add("replay_path", "is not set: provider mock replays a recorded file; set replay_path or $%s", ReplayEnv)
			} else {
				r, err := NewReplay(path)
				p.addErr("replay_path", err)
				inner = r
			}
		}
		if err := p.result(); err != nil {
			return nil, err
		}
		// A scripted reply's cost_usd counts as "scripted"; a replayed decision keeps the
		// cost and source it was recorded with, so the replay is exact.
		reported := CostFromScript
		if s.Provider == "mock" {
			reported = ""
		}
		return &pricedModel{Model: inner, pricer: newPricer(Settings{Prices: s.Prices, CostHeader: CostHeaderNone}, reported)}, nil
	}
	d, ok := providers[s.Provider]
	if !ok {
		return nil, SettingErrors{unknownProvider(s.Provider)}
	}
	p.checkHTTP(s, s.Provider, d)
	if s.Script != nil {
		// Not used by this provider, but an overlay may switch to scripted: its mistakes are
		// found now.
		p.checkScript(s.Script)
	}
	t := &Transport{
		BaseURL:      s.BaseURL,
		Path:         d.path,
		Header:       http.Header{},
		KeyEnv:       d.keyEnv,
		KeyHeader:    d.keyHeader,
		Client:       s.Client,
		Timeout:      s.Timeout,
		OnRetry:      s.OnRetry,
		InjectHeader: s.InjectHeader,
	}
	if t.Timeout == 0 {
		t.Timeout = d.wire.defaultTimeout()
	}
	if t.BaseURL == "" && d.baseURLEnv != "" {
		t.BaseURL = os.Getenv(d.baseURLEnv)
	}
	if t.BaseURL == "" {
		t.BaseURL = d.baseURL
	}
	if s.APIKeyEnv != "" {
		t.KeyEnv = s.APIKeyEnv
	}
	switch {
	case s.MaxRetries != nil:
		t.MaxAttempts = max(*s.MaxRetries, 0) + 1
	case d.wire == wireMessages:
		t.MaxAttempts = 3 // the reference's default for anthropic: 2 retries
	default:
		t.MaxAttempts = 1 // Chat Completions and Responses: a gateway in front owns retries
	}
	m := &httpModel{
		provider:    s.Provider,
		model:       s.RequestModel(),
		aliases:     s.Anthropic.Aliases,
		maxTokens:   s.MaxTokens,
		temperature: s.Temperature,
		stream:      s.Stream,
		holdStream:  s.HoldStream,
		pricer:      newPricer(s, CostFromProvider),
		transport:   t,
	}
	var err error
	switch d.wire {
	case wireMessages:
		m.wire, err = newMessagesWire(s)
	case wireChat:
		m.wire, err = newChatWire(s)
	case wireResponses:
		m.wire, err = newResponsesWire(s)
	}
	p.addErr("", err)
	if m.wire != nil && s.Stream && d.wire != wireResponses && m.wire.stream() == nil {
		p.add("stream", "provider %s cannot stream yet (its wire has no stream decoder); remove stream", s.Provider)
	}
	if err := p.result(); err != nil {
		return nil, err
	}
	// The provider's own headers, then those its wire's settings add, then
	// the configured ones (headers_env), which replace any of the same name.
	for k, v := range d.headers {
		t.Header.Set(k, v)
	}
	for k, v := range m.wire.header() {
		t.Header[k] = v
	}
	for _, v := range s.Headers {
		t.Secrets = append(t.Secrets, v)
	}
	for k, v := range s.Headers {
		// A beta the wire asks for (refusal fallbacks) and the user's own betas are one
		// comma-separated list: neither replaces the other.
		if wire := t.Header.Get(k); wire != "" && http.CanonicalHeaderKey(k) == "Anthropic-Beta" {
			v = v + "," + wire
		}
		t.Header.Set(k, v)
	}
	return m, nil
}

// RequestModel is the model a request names when its call names none:
// anthropic's default (through its aliases), else the configured model,
// else the provider's default ("" for scripted and mock without one).
// Spans and logs name the model with it.
func (s Settings) RequestModel() string {
	return s.ResolveModel("")
}

// ResolveModel is the model id a call naming model asks for: the model id
// of an alias (anthropic's aliases), else model itself; for "", the
// default model (RequestModel). The llm.judge guard names its model with an
// alias.
func (s Settings) ResolveModel(model string) string {
	if model == "" {
		model = s.Anthropic.Default
		if model == "" {
			model = s.Model
		}
	}
	if id, ok := s.Anthropic.Aliases[model]; ok {
		return id
	}
	if model == "" {
		return providers[s.Provider].model
	}
	return model
}

// httpModel is a provider reached over HTTP: request translator, transport,
// result translator.
type httpModel struct {
	provider    string
	model       string            // when a call names none, resolved
	aliases     map[string]string // alias to model id
	maxTokens   int
	temperature *float64
	stream      bool
	holdStream  bool
	pricer      *pricer
	wire        wireFormat
	transport   *Transport
}

// Generate fills in the configured model (resolving an alias), output
// limit and temperature where the call leaves them unset, then translates,
// sends (streamed with stream) and reads. The answer gets the invocation id
// (sent as the X-Invocation-Id header), its cost, and with
// block_empty_answers an empty answer becomes a refusal. An answer reporting
// usage no request can have (a negative count or cost, a count past 10^12)
// is an error; one reporting no usage at all gets estimated tokens and a
// warning. Errors name the provider, and neither they nor the answer's error,
// refusal reason and warnings hold the API key or a headers_env value.
func (m *httpModel) Generate(ctx context.Context, c *Call) (*Result, error) {
	if c == nil {
		return nil, fmt.Errorf("model provider %s: no call", m.provider)
	}
	call := *c
	switch id, alias := m.aliases[call.Controls.Model]; {
	case alias:
		call.Controls.Model = id
	case call.Controls.Model == "":
		call.Controls.Model = m.model
	}
	// The Messages wire keeps its own defaults: max_tokens for a request, stream_max_tokens
	// for a streamed one; filling the call's limit here would hide which one applies.
	if _, messages := m.wire.(*messagesWire); call.Controls.MaxTokens == 0 && !messages {
		call.Controls.MaxTokens = m.maxTokens
	}
	if call.Controls.Temperature == nil {
		call.Controls.Temperature = m.temperature
	}
	body, err := m.wire.request(&call, m.stream)
	if err != nil {
		return nil, fmt.Errorf("model provider %s: %w", m.provider, err)
	}
	red := m.transport.redactor()
	res, err := m.send(ctx, &call, body)
	if err != nil {
		return nil, red.err(fmt.Errorf("model provider %s: %w", m.provider, err))
	}
	red.result(res)
	return res, nil
}

// send sends one translated request and reads its answer: its usage checked (a number no
// request can report fails it), estimated when the provider reported none, and priced.
func (m *httpModel) send(ctx context.Context, call *Call, body []byte) (*Result, error) {
	var res *Result
	var header http.Header
	var err error
	if m.stream {
		res, header, err = m.generateStream(ctx, body)
	} else {
		var resp []byte
		if resp, header, err = m.transport.Do(ctx, body); err == nil {
			if err = impossibleUsage(resp); err == nil {
				res, err = m.wire.result(resp, header)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if err := checkUsage(res); err != nil {
		return nil, err
	}
	estimateUsage(call, res)
	res.Evidence.InvocationID = InvocationID(ctx)
	if err := m.pricer.apply(res, header, call.Controls.Model); err != nil {
		return nil, err
	}
	return res, nil
}
