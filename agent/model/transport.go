package model

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Transport defaults, used when the matching field is zero.
const (
	DefaultMaxAttempts = 3
	// maxRetryAfter bounds how long a provider's Retry-After may hold the
	// run; asked to wait longer, the transport gives up with the status.
	maxRetryAfter = time.Minute
	// maxResponseBytes bounds what is read from a provider.
	maxResponseBytes = 32 << 20
)

// Transport POSTs translated request bodies to one provider endpoint and
// owns the retries: HTTP 408, 409, 425, 429, 5xx and connection errors
// (per-request timeouts included) are retried up to MaxAttempts times with
// exponential backoff and jitter, or after the provider's Retry-After when
// it sends one. Cancelling the context stops at once, mid-request or
// mid-wait. The API key is read from the environment on each call and never
// appears in an error, nor do Secrets. Redirects are not followed, so that
// the key and the headers never reach another address: a 3xx answer is an
// error naming the host it points to. When the context holds a recording span (the agent's
// model request span), each retry is an event of it: the failed attempt and
// its error.type. Each attempt carries the context's invocation id
// (WithInvocationID) in the X-Invocation-Id header. DoStream reads a
// streamed answer.
//
// The zero value is not usable: BaseURL is required. A Transport is safe
// for concurrent use if its fields are not changed.
type Transport struct {
	// BaseURL and Path make the endpoint URL: BaseURL without its trailing
	// slash, then Path (such as "/chat/completions").
	BaseURL, Path string
	// Header holds extra headers sent on every request (anthropic-version,
	// X-Title, ...).
	Header http.Header
	// KeyEnv names the environment variable holding the API key; empty
	// means the provider takes none. Naming a variable that is unset or
	// empty is an error.
	KeyEnv string
	// Secrets are values besides the key that never appear in an error
	// (the headers_env values: a provider may echo a header back).
	Secrets []string
	// KeyHeader is the header the key goes in, with KeyPrefix before it.
	// An empty KeyHeader means "Authorization" with KeyPrefix "Bearer ".
	KeyHeader, KeyPrefix string
	// Client sends the requests; nil means http.DefaultClient.
	Client *http.Client
	// Timeout bounds each attempt; zero means only the context bounds it.
	Timeout time.Duration
	// MaxAttempts bounds the attempts, the first included; zero means
	// DefaultMaxAttempts.
	MaxAttempts int
	// Backoff returns the wait before attempt+1, after a failed attempt
	// (1-based) that had no Retry-After; nil means ExponentialBackoff.
	Backoff func(attempt int) time.Duration
	// OnRetry, when set, is called before each wait for a retry with the
	// failed attempt (1-based) and its error; the agent counts retries
	// with it. It must not block.
	OnRetry func(attempt int, err error)
	// InjectHeader, when set, adds the trace context of the request's
	// context to each attempt's headers (telemetry.Provider.InjectHeader:
	// traceparent and tracestate), so that a provider or proxy that traces
	// nests its spans under the model request's. It is called after the
	// other headers are set, so a configured header of the same name does
	// not replace the request's own trace context. Nil adds nothing.
	InjectHeader func(ctx context.Context, h http.Header)
}

// StatusError is a provider's answer with a status other than 2xx.
type StatusError struct {
	StatusCode int
	// Message is the provider's own error message, or the start of the
	// body when it sent none that could be read.
	Message string
	// Attempts is how many requests were made.
	Attempts int
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	return s
}

// Retryable reports whether the status is one a retry may cure.
func (e *StatusError) Retryable() bool { return retryableStatus(e.StatusCode) }

func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return code >= 500 && code <= 599
}

// ExponentialBackoff waits about 500ms before the second attempt, doubling
// each time up to 30s, with up to half of each wait random so that clients
// failing together do not retry together.
func ExponentialBackoff(attempt int) time.Duration {
	d := 500 * time.Millisecond
	for i := 1; i < attempt && d < 30*time.Second; i++ {
		d *= 2
	}
	d = min(d, 30*time.Second)
	return d/2 + rand.N(d/2+1)
}

// Do sends body and returns the response body and headers of the first
// 2xx answer. On failure the error says the endpoint, the status and the
// provider's message (a *StatusError is in its chain), and header holds the
// last answer's headers when there was one.
func (t *Transport) Do(ctx context.Context, body []byte) ([]byte, http.Header, error) {
	return t.send(ctx, body, false, func(r io.Reader) ([]byte, error) {
		b, err := io.ReadAll(io.LimitReader(r, maxResponseBytes))
		if err != nil {
			return nil, fmt.Errorf("reading the response: %w", err)
		}
		return b, nil
	})
}

// send makes the attempts of one request: read consumes the body of a 2xx
// answer within the attempt (and its timeout). An error read wraps in
// finalError is not retried.
func (t *Transport) send(ctx context.Context, body []byte, stream bool, read func(io.Reader) ([]byte, error)) ([]byte, http.Header, error) {
	if t.BaseURL == "" {
		return nil, nil, errors.New("model transport: no base URL")
	}
	url := strings.TrimRight(t.BaseURL, "/") + t.Path
	if _, err := http.NewRequest(http.MethodPost, url, nil); err != nil {
		return nil, nil, fmt.Errorf("model transport: %w", err)
	}
	key := ""
	if t.KeyEnv != "" {
		key = os.Getenv(t.KeyEnv)
		if key == "" {
			return nil, nil, fmt.Errorf("POST %s: environment variable %s is not set", url, t.KeyEnv)
		}
	}
	red := t.redactor()
	attempts := t.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultMaxAttempts
	}
	backoff := t.Backoff
	if backoff == nil {
		backoff = ExponentialBackoff
	}
	for attempt := 1; ; attempt++ {
		respBody, header, err := t.attempt(ctx, url, key, body, stream, read)
		if err == nil {
			return respBody, header, nil
		}
		if ctx.Err() != nil {
			return nil, header, fmt.Errorf("POST %s: %w", url, ctx.Err())
		}
		var final *finalError
		if errors.As(err, &final) {
			return nil, header, fmt.Errorf("POST %s: %w", url, red.err(final.err))
		}
		var status *StatusError
		isStatus := errors.As(err, &status)
		if isStatus {
			status.Attempts = attempt
			status.Message = red.text(status.Message)
		}
		if attempt >= attempts || (isStatus && !status.Retryable()) {
			if !isStatus && attempt > 1 {
				return nil, header, fmt.Errorf("POST %s: %w (after %d attempts)", url, red.err(err), attempt)
			}
			return nil, header, fmt.Errorf("POST %s: %w", url, red.err(err))
		}
		wait := backoff(attempt)
		if isStatus {
			if d, ok := retryAfter(header.Get("Retry-After"), time.Now()); ok {
				if d > maxRetryAfter {
					return nil, header, fmt.Errorf("POST %s: %w; provider asks to retry after %s", url, red.err(err), d.Round(time.Second))
				}
				wait = d
			}
		}
		if t.OnRetry != nil {
			t.OnRetry(attempt, red.err(err))
		}
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.AddEvent("retry", trace.WithAttributes(
				attribute.Int("mcp_gateway.llm.attempt", attempt),
				attribute.String("error.type", ErrorType(err)),
			))
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, header, fmt.Errorf("POST %s: %w (waiting to retry after %v)", url, ctx.Err(), red.err(err))
		case <-timer.C:
		}
	}
}

// finalError is a failure of an attempt that a retry must not repeat: a
// streamed answer that broke after some of it was delivered.
type finalError struct{ err error }

func (e *finalError) Error() string { return e.err.Error() }
func (e *finalError) Unwrap() error { return e.err }

// attempt makes one request. A non-2xx answer is a *StatusError; a 2xx
// answer's body is read by read, within the attempt's timeout.
func (t *Transport) attempt(ctx context.Context, url, key string, body []byte, stream bool, read func(io.Reader) ([]byte, error)) ([]byte, http.Header, error) {
	parent := ctx
	if t.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.Timeout)
		defer cancel()
	}
	// timedOut explains an error caused by the attempt's own deadline, not the caller's.
	timedOut := func(err error) error {
		if t.Timeout > 0 && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("no complete answer within the request timeout of %s (llm.timeout): %w", t.Timeout, err)
		}
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for name, values := range t.Header {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	if key != "" {
		name, prefix := t.KeyHeader, t.KeyPrefix
		if name == "" {
			name, prefix = "Authorization", "Bearer "
		}
		req.Header.Set(name, prefix+key)
	}
	if id := InvocationID(ctx); id != "" {
		req.Header.Set(InvocationHeader, id)
	}
	if t.InjectHeader != nil {
		t.InjectHeader(ctx, req.Header)
	}
	resp, err := t.noRedirects().Do(req)
	if err != nil {
		return nil, nil, timedOut(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return nil, resp.Header, &StatusError{StatusCode: resp.StatusCode, Message: redirectMessage(req, resp.Header.Get("Location"))}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		respBody, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
		if err != nil {
			return nil, resp.Header, timedOut(fmt.Errorf("reading the response: %w", err))
		}
		return nil, resp.Header, &StatusError{StatusCode: resp.StatusCode, Message: providerMessage(respBody)}
	}
	respBody, err := read(resp.Body)
	if err != nil {
		var final *finalError
		if errors.As(err, &final) {
			return nil, resp.Header, &finalError{timedOut(final.err)}
		}
		return nil, resp.Header, timedOut(err)
	}
	return respBody, resp.Header, nil
}

// redactor removes the key (as the environment holds it now) and Secrets from text.
func (t *Transport) redactor() redactor {
	key := ""
	if t.KeyEnv != "" {
		key = os.Getenv(t.KeyEnv)
	}
	return newRedactor(append([]string{key}, t.Secrets...)...)
}

// noRedirects is the transport's client, not following redirects: Go's client would send the
// key and the configured headers on to the address a provider points at.
func (t *Transport) noRedirects() *http.Client {
	c := http.Client{}
	if t.Client != nil {
		c = *t.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// redirectMessage says where a provider redirected a request, by host only (a redirect's
// query may carry a token), and what to do.
func redirectMessage(req *http.Request, location string) string {
	where := "another address"
	if u, err := req.URL.Parse(location); err == nil && location != "" && u.Host != "" {
		where = u.Scheme + "://" + u.Host
		if u.Host == req.URL.Host && u.Scheme == req.URL.Scheme {
			where += " (the same host, path " + truncateText(u.EscapedPath(), 60) + ")"
		}
	}
	return "the provider redirected the request to " + where +
		"; redirects are not followed, so that the API key and headers are never sent elsewhere: set llm.base_url to the final address"
}

// retryAfter reads a Retry-After value: delay seconds or an HTTP date.
func retryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(value); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	when, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return max(when.Sub(now), 0), true
}

// ErrorType classifies a failed model request for the error.type attribute
// of its span, in a few bounded values: the HTTP status code of a provider's
// non-2xx answer ("429"), "cancelled" when the context was cancelled,
// "timeout" when a deadline or timeout passed, and "_OTHER" for the rest (a
// connection refused, an answer that does not parse, a missing key). The
// error's text is never used: it may quote the provider's message.
func ErrorType(err error) string {
	var status *StatusError
	var netErr net.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &status):
		return strconv.Itoa(status.StatusCode)
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	default:
		return "_OTHER"
	}
}
