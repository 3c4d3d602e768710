package model

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// TestErrorsAreRedacted checks that neither the API key nor a headers_env value reaches an
// error a Model returns, whatever wrote it: an error object in a 2xx answer (Chat Completions,
// Messages), a non-2xx answer echoing a header, an error chunk mid-stream; the status stays in
// the error's chain.
func TestErrorsAreRedacted(t *testing.T) {
	const key, team = "sk-PLANTEDKEY-1234567890abcdef", "team-PLANTEDHDR-abcdef"
	cases := []struct {
		name, provider string
		status         int
		body           string
		stream         bool
	}{
		{"chat 200 error", "openai", 200, `{"error":{"message":"invalid key ` + key + ` for ` + team + `"}}`, false},
		{"anthropic 200 error", "anthropic", 200, `{"type":"error","error":{"type":"authentication_error","message":"bad x-api-key ` + key + ` (` + team + `)"}}`, false},
		{"401 echoing the header", "openai", 401, `{"error":{"message":"X-Team ` + team + ` may not use key ` + key + `"}}`, false},
		{"error chunk mid-stream", "openai", 200, "data: {\"id\":\"s\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n" +
			`data: {"error":{"message":"boom ` + key + ` ` + team + `"}}` + "\n\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MY_KEY", key)
			f := newFakeProvider(t, answerWith(tc.status, nil, tc.body))
			m, err := New(Settings{Provider: tc.provider, BaseURL: f.URL, APIKeyEnv: "MY_KEY", Stream: tc.stream,
				Headers: map[string]string{"X-Team": team}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Generate(context.Background(), validCall())
			if err == nil {
				t.Fatal("no error")
			}
			if msg := err.Error(); strings.Contains(msg, key) || strings.Contains(msg, team) || !strings.Contains(msg, "[REDACTED]") {
				t.Errorf("error %q, want the key and the header value redacted", msg)
			}
			if got := f.last(t).header.Get("X-Team"); got != team {
				t.Errorf("X-Team sent %q, want %q", got, team)
			}
			var status *StatusError
			if tc.status == 401 && (!errors.As(err, &status) || status.StatusCode != 401 || ErrorType(err) != "401") {
				t.Errorf("the status is lost: %T %v", err, err)
			}
		})
	}
}

// TestRedirectsAreNotFollowed checks that a provider answering with a redirect to another host
// gets neither the key nor the headers there: the request fails, saying where it was sent and
// to set base_url, without the redirect's query.
func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Setenv("MY_KEY", "sk-redirect-key")
	other := newFakeProvider(t, chatAnswer("m", "stolen", 1, 1))
	f := newFakeProvider(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/v1/chat/completions?token=QUERY-SECRET", http.StatusTemporaryRedirect)
	})
	m, err := New(Settings{Provider: "anthropic", BaseURL: f.URL, APIKeyEnv: "MY_KEY", Headers: map[string]string{"X-Team": "team-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Generate(context.Background(), validCall())
	if other.count() != 0 {
		t.Fatalf("the redirect was followed: the other host got %d requests", other.count())
	}
	host := strings.TrimPrefix(other.URL, "http://")
	if err == nil || !strings.Contains(err.Error(), "HTTP 307") || !strings.Contains(err.Error(), "redirected the request to http://"+host) ||
		!strings.Contains(err.Error(), "set llm.base_url to the final address") || strings.Contains(err.Error(), "QUERY-SECRET") {
		t.Fatalf("err %v", err)
	}
	if f.count() != 1 {
		t.Errorf("%d requests, want 1 (a redirect is not retried)", f.count())
	}
	// A client of the caller's own keeps its other settings but does not follow either.
	tr := &Transport{BaseURL: f.URL, Client: &http.Client{}, MaxAttempts: 1}
	if _, _, err := tr.Do(context.Background(), []byte(`{}`)); err == nil || other.count() != 0 {
		t.Fatalf("err %v, other host got %d", err, other.count())
	}
}

// TestCutSecretsAreRedacted checks that provider text cut short for a message is redacted
// even where the cut fell inside a secret: a long error body ending in the key, a cost header
// that is not a number (whose value the warning never quotes); and that the redactor takes
// only the start of a secret (minSecret characters or more) just before an ellipsis.
func TestCutSecretsAreRedacted(t *testing.T) {
	const key, team = "sk-PLANTEDKEY-1234567890abcdef", "team-PLANTEDHDR-abcdef"
	leaks := func(t *testing.T, what, s string) {
		t.Helper()
		for _, secret := range []string{key, team} {
			if strings.Contains(s, secret[:len(secret)-1]) || strings.Contains(s, secret[:minSecret+6]) {
				t.Errorf("%s %q shows part of %q", what, s, secret)
			}
		}
	}
	t.Run("error body", func(t *testing.T) {
		t.Setenv("MY_KEY", key)
		for _, body := range []string{strings.Repeat("A", 170) + " " + key, strings.Repeat("A", 185) + " " + team + " tail"} {
			f := newFakeProvider(t, answerWith(400, nil, body))
			m, err := New(Settings{Provider: "openai", BaseURL: f.URL, APIKeyEnv: "MY_KEY", Headers: map[string]string{"X-Team": team}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Generate(context.Background(), validCall())
			if err == nil {
				t.Fatal("no error")
			}
			leaks(t, "error", err.Error())
			if !strings.Contains(err.Error(), "[REDACTED]…") {
				t.Errorf("error %q, want the cut secret redacted before the ellipsis", err)
			}
		}
	})
	t.Run("cost header", func(t *testing.T) {
		t.Setenv("MY_KEY", key)
		f := newFakeProvider(t, answerWith(0, map[string]string{"X-Litellm-Response-Cost": "cost=" + key + "-" + team}, `{"id":"c","model":"m","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`))
		m, err := New(Settings{Provider: "openai", BaseURL: f.URL, APIKeyEnv: "MY_KEY", Headers: map[string]string{"X-Team": team}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := m.Generate(context.Background(), validCall())
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Evidence.Warnings) != 1 || res.Evidence.Warnings[0] != "the cost header x-litellm-response-cost is not a decimal number of USD; it was ignored" {
			t.Errorf("warnings %q, want one naming the header, not its value", res.Evidence.Warnings)
		}
	})
	t.Run("redactor", func(t *testing.T) {
		r := newRedactor(key, team)
		for in, want := range map[string]string{
			"x " + key[:20] + "…":                      "x [REDACTED]…",
			"x " + key[:4] + "… and " + team[:9] + "…": "x [REDACTED]… and [REDACTED]…",
			"x " + key[:3] + "…":                       "x " + key[:3] + "…",
			"x " + key[:20] + " y…":                    "x " + key[:20] + " y…",
			"no cut " + key[:20]:                       "no cut " + key[:20],
			"whole " + key + "…":                       "whole [REDACTED]…",
		} {
			if got := r.text(in); got != want {
				t.Errorf("text(%q) = %q, want %q", in, got, want)
			}
		}
	})
}

// TestEscapedSecretsAreRedacted checks that a secret a provider wrote with JSON escapes is
// redacted: in an error body of an unfamiliar JSON shape (its values decoded), in a body that
// is not JSON (its \u escapes decoded), in an error message quoted once more.
func TestEscapedSecretsAreRedacted(t *testing.T) {
	const key = "sk-PLANTEDKEY-1234567890abcdef"
	escaped := strings.ReplaceAll(key, "-", `\u002d`)
	cases := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"unfamiliar JSON", 401, `{"detail":"bad key ` + escaped + `"}`, "detail: bad key [REDACTED]"},
		{"nested unfamiliar JSON", 401, `{"errors":[{"code":"auth","text":"bad key ` + escaped + `"}]}`, "code: auth; text: bad key [REDACTED]"},
		{"text", 401, `bad key ` + escaped + ` here`, "bad key [REDACTED] here"},
		{"quoted twice", 200, `{"error":{"message":"bad key ` + strings.ReplaceAll(key, "-", `\\u002d`) + `"}}`, "bad key [REDACTED]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MY_KEY", key)
			f := newFakeProvider(t, answerWith(tc.status, nil, tc.body))
			m, err := New(Settings{Provider: "openai", BaseURL: f.URL, APIKeyEnv: "MY_KEY"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Generate(context.Background(), validCall())
			if err == nil {
				t.Fatal("no error")
			}
			if msg := err.Error(); strings.Contains(msg, "PLANTEDKEY") || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q, want %q and no part of the key", msg, tc.want)
			}
		})
	}
}

// TestEvidenceIsRedacted checks that the evidence a provider writes (the x-request-id header,
// the answer's model, a refusal's category), which the transcript, the printout and the audit
// chain keep, has the key and the headers_env values redacted.
func TestEvidenceIsRedacted(t *testing.T) {
	const key, team = "sk-PLANTEDKEY-1234567890abcdef", "team-PLANTEDHDR-abcdef"
	t.Setenv("MY_KEY", key)
	for _, tc := range []struct{ name, provider, body string }{
		{"chat", "openai", `{"id":"c","model":"gpt-` + team + `","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`},
		{"messages refusal", "anthropic", `{"id":"m","type":"message","model":"claude-` + key + `","content":[],"stop_reason":"refusal","stop_details":{"type":"refusal","category":"cat-` + team + `"},"usage":{"input_tokens":1,"output_tokens":1}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProvider(t, answerWith(0, map[string]string{"X-Request-Id": "req-" + key, "Request-Id": "req-" + team}, tc.body))
			m, err := New(Settings{Provider: tc.provider, BaseURL: f.URL, APIKeyEnv: "MY_KEY", Headers: map[string]string{"X-Team": team}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := m.Generate(context.Background(), validCall())
			if err != nil {
				t.Fatal(err)
			}
			for what, v := range map[string]string{"request id": res.Evidence.RequestID, "model": res.Evidence.Model, "refusal category": res.RefusalCategory} {
				if strings.Contains(v, "PLANTED") {
					t.Errorf("%s %q holds a secret", what, v)
				}
			}
			if !strings.HasPrefix(res.Evidence.RequestID, "req-[REDACTED]") || !strings.HasSuffix(res.Evidence.Model, "-[REDACTED]") {
				t.Errorf("request id %q, model %q: want them kept, the secret redacted", res.Evidence.RequestID, res.Evidence.Model)
			}
		})
	}
}
