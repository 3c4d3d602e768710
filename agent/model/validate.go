package model

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/envname"
	"github.com/mcp-gateway/mcp-gateway/internal/suggest"
)

// Default per-request timeouts (Settings.Timeout zero), the reference's.
const (
	DefaultTimeout         = 60 * time.Second  // Chat Completions and Responses
	DefaultMessagesTimeout = 600 * time.Second // Messages (anthropic)
)

// The values of the enumerated settings.
var (
	thinkingValues  = []string{"adaptive", "none"}
	effortValues    = []string{"low", "medium", "high", "xhigh", "max"}
	fallbacksValues = []string{"default", "none"}
)

// headerNameRE is an HTTP field name (RFC 9110 token).
var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// IsEnvName reports whether name is an environment variable name (letters, digits and _, not
// starting with a digit) that does not look like a key written in its place (envname.Valid).
func IsEnvName(name string) bool { return envname.Valid(name) }

// NotAVariable is the problem of an api_key_env or headers_env value that is not an
// environment variable name, most often the secret itself written in its place; it never
// repeats the value.
const NotAVariable = "does not look like an environment variable name (letters, digits and _, not starting with a digit, and not shaped like a key); " +
	"keys and header values belong in the environment, never in the file: put the value in a variable and name the variable here"

func (w wire) String() string {
	switch w {
	case wireMessages:
		return "Messages"
	case wireChat:
		return "Chat Completions"
	default:
		return "Responses"
	}
}

// defaultTimeout is the per-request timeout of a wire when none is set.
func (w wire) defaultTimeout() time.Duration {
	if w == wireMessages {
		return DefaultMessagesTimeout
	}
	return DefaultTimeout
}

// providersOf lists the providers speaking w, sorted.
func providersOf(w wire) []string {
	var names []string
	for name, d := range providers {
		if d.wire == w {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// problems collects SettingErrors.
type problems SettingErrors

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, &SettingError{Key: key, Msg: fmt.Sprintf(format, args...)})
}

// addErr adds what a constructor returned: its SettingErrors as they are,
// any other error under key.
func (p *problems) addErr(key string, err error) {
	var list SettingErrors
	var one *SettingError
	switch {
	case err == nil:
	case errors.As(err, &list):
		*p = append(*p, list...)
	case errors.As(err, &one):
		*p = append(*p, one)
	default:
		p.add(key, "%s", err.Error())
	}
}

// result is the problems as an error, each setting once (the first problem
// found with it), or nil when there are none.
func (p problems) result() error {
	if len(p) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var out SettingErrors
	for _, e := range p {
		if seen[e.Key] && e.Key != "" {
			continue
		}
		seen[e.Key] = true
		out = append(out, e)
	}
	return out
}

// enum checks a setting with a fixed set of values; empty is its default.
func (p *problems) enum(key, v string, allowed []string) {
	if v == "" || slices.Contains(allowed, v) {
		return
	}
	hint := ""
	if c := suggest.Closest(v, allowed); c != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", c)
	}
	p.add(key, "%q is not valid%s; use one of: %s", v, hint, strings.Join(allowed, ", "))
}

// unknownProvider is the problem of a provider New does not know.
func unknownProvider(name string) *SettingError {
	if name == "" {
		return &SettingError{Key: "provider", Msg: "is not set; choose one of " + strings.Join(Providers(), ", ")}
	}
	hint := ""
	if c := suggest.Closest(name, Providers()); c != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", c)
	}
	return &SettingError{Key: "provider", Msg: fmt.Sprintf("%q is not a model provider%s; use one of: %s", name, hint, strings.Join(Providers(), ", "))}
}

// checkPrices checks the price table, which every provider uses.
func (p *problems) checkPrices(prices map[string]Price) {
	for _, name := range slices.Sorted(maps.Keys(prices)) {
		if strings.TrimSpace(name) == "" {
			p.add("prices", "a price needs the model id it prices as its key")
			continue
		}
		pr := prices[name]
		for _, f := range []struct {
			key string
			v   float64
		}{{"input", pr.Input}, {"output", pr.Output}, {"cache_read", pr.CacheRead}, {"cache_write", pr.CacheWrite}} {
			if !(f.v >= 0) || math.IsInf(f.v, 1) {
				p.add("prices."+name+"."+f.key, "must be 0 or more USD per million tokens, got %g", f.v)
			}
		}
	}
}

// only is a setting that some wires take and the others refuse.
type only struct {
	key   string
	set   bool
	wires []wire
}

// checkHTTP checks the settings of an HTTP provider speaking d.wire: the
// generic ones, then that each setting given is one this provider takes,
// then the values of those only it takes.
func (p *problems) checkHTTP(s Settings, name string, d providerDefaults) {
	if s.APIKeyEnv != "" && !IsEnvName(s.APIKeyEnv) {
		p.add("api_key_env", "%s", NotAVariable)
	}
	if s.MaxTokens < 0 {
		p.add("max_tokens", "must not be negative, got %d", s.MaxTokens)
	}
	if s.Timeout < 0 {
		p.add("timeout", "must not be negative; remove it for the default of %s", d.wire.defaultTimeout())
	}
	if s.MaxRetries != nil && *s.MaxRetries < 0 {
		p.add("max_retries", "must be 0 (no retries: behind a gateway that retries) or more, got %d", *s.MaxRetries)
	}
	if t := s.Temperature; t != nil {
		limit := 2.0
		if d.wire == wireMessages {
			limit = 1
		}
		if !(*t >= 0 && *t <= limit) {
			p.add("temperature", "must be from 0 to %g for provider %s, got %g", limit, name, *t)
		}
	}
	if h := s.CostHeader; h != "" && h != CostHeaderNone && !headerNameRE.MatchString(h) {
		p.add("cost_header", "%q is not an HTTP header name; name the response header a gateway reports the cost in, or write none", h)
	}
	for _, h := range slices.Sorted(maps.Keys(s.Headers)) {
		if !headerNameRE.MatchString(h) {
			p.add("headers_env."+h, "%q is not an HTTP header name", h)
		}
	}
	p.checkPrices(s.Prices)

	a := s.Anthropic
	msgs, chat, both := []wire{wireMessages}, []wire{wireChat}, []wire{wireChat, wireMessages}
	for _, o := range []only{
		{"max_tokens_param", s.MaxTokensParam != "", chat},
		{"block_empty_answers", s.BlockEmptyAnswers, chat},
		{"stream", s.Stream, both},
		{"hold_stream", s.HoldStream, both},
		{"thinking", a.Thinking != "", msgs},
		{"effort", a.Effort != "", msgs},
		{"fallbacks", a.Fallbacks != "", msgs},
		{"structured_outputs", a.StructuredOutputs, msgs},
		{"sampling", a.Sampling, msgs},
		{"stream_max_tokens", a.StreamMaxTokens != 0, msgs},
		{"default", a.Default != "", msgs},
		{"aliases", len(a.Aliases) > 0, msgs},
	} {
		if !o.set || slices.Contains(o.wires, d.wire) {
			continue
		}
		var takers string
		switch {
		case len(o.wires) == 2:
			takers = "the Chat Completions providers (" + strings.Join(providersOf(wireChat), ", ") + ") and anthropic only"
		case o.wires[0] == wireChat:
			takers = "the Chat Completions providers only (" + strings.Join(providersOf(wireChat), ", ") + ")"
		default:
			takers = "provider anthropic only"
		}
		p.add(o.key, "is a setting of %s; provider %s (%s) does not take it", takers, name, d.wire)
	}

	switch d.wire {
	case wireChat:
		p.enum("max_tokens_param", s.MaxTokensParam, []string{MaxTokensParam, MaxCompletionTokensParam})
	case wireMessages:
		p.enum("thinking", a.Thinking, thinkingValues)
		p.enum("effort", a.Effort, effortValues)
		p.enum("fallbacks", a.Fallbacks, fallbacksValues)
		if a.StreamMaxTokens < 0 {
			p.add("stream_max_tokens", "must not be negative, got %d", a.StreamMaxTokens)
		}
		if s.Temperature != nil && !a.Sampling {
			p.add("temperature", "is sent to provider anthropic only with sampling: true, since current models reject sampling parameters; set sampling: true (older models only), or remove temperature")
		}
		p.checkAliases(s)
	}
	if s.HoldStream && !s.Stream && d.wire != wireResponses {
		p.add("hold_stream", "holds back the chunks of a streamed answer, but stream is not set; set stream: true, or remove hold_stream")
	}
}

// checkAliases checks anthropic's default and aliases: an alias names a
// model id; with aliases, default names one of them; without, default is a
// model id. default and model say the same thing, so only one is given.
func (p *problems) checkAliases(s Settings) {
	a := s.Anthropic
	for _, name := range slices.Sorted(maps.Keys(a.Aliases)) {
		switch {
		case strings.TrimSpace(name) == "":
			p.add("aliases", "an alias needs a name")
		case strings.TrimSpace(a.Aliases[name]) == "":
			p.add("aliases."+name, "names no model id; give the model id the alias stands for")
		}
	}
	if a.Default == "" {
		return
	}
	if s.Model != "" {
		p.add("default", "and model are both given, and both say which model a request that names none gets; keep one (default names an alias, model a model id)")
		return
	}
	if _, ok := a.Aliases[a.Default]; !ok && len(a.Aliases) > 0 {
		names := slices.Sorted(maps.Keys(a.Aliases))
		hint := ""
		if c := suggest.Closest(a.Default, names); c != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", c)
		}
		p.add("default", "%q is not one of the aliases%s (%s); name an alias, or give a model id in model instead", a.Default, hint, strings.Join(names, ", "))
	}
}

// checkScript checks the scripted provider's script (NewScripted's checks), whatever the
// provider: an overlay may switch to scripted.
func (p *problems) checkScript(sc *ScriptedSettings) {
	if sc == nil || (len(sc.Rules) == 0 && len(sc.Replies) == 0) {
		p.add("provider", "scripted needs a script: give rules (matched against the last message) or replies (used in order)")
		return
	}
	_, err := NewScripted(*sc)
	p.addErr("", err)
}

// TakesBlockEmptyAnswers reports whether provider takes llm.block_empty_answers: the Chat
// Completions providers do (the setting's row in checkHTTP); anthropic and openai.responses
// refuse it at load, and scripted and mock ignore it.
func TakesBlockEmptyAnswers(provider string) bool {
	d, ok := providers[provider]
	return ok && d.wire == wireChat
}
