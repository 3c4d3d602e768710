package upstream

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// dialHTTP returns the streamable HTTP transport of a new session. The headers and the OAuth
// client secret are read from their environment variables at every start, so a rotated
// credential is picked up by a restart. The requests carry only these credentials of the
// gateway's own (oauth.go): none of a downstream client's.
func (u *Upstream) dialHTTP(s *session) (mcp.Transport, error) {
	endpoint, err := url.Parse(u.cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	header, err := headersFromEnv(u.cfg.HeadersEnv)
	if err != nil {
		return nil, err
	}
	var tokens *tokenSource
	if o := u.cfg.OAuth; o != nil {
		if tokens, err = u.tokenSource(o); err != nil {
			return nil, err
		}
	}
	s.release = u.httpTransport.CloseIdleConnections
	u.output.newSession()
	limit := u.maxResultBytes()
	var base http.RoundTripper = u.httpTransport
	if u.opts.Telemetry != nil {
		base = &traceTransport{base: base, tel: u.opts.Telemetry}
	}
	base = &headerTransport{base: base, origin: origin(endpoint), header: header}
	if tokens != nil {
		base = &oauthTransport{base: base, origin: origin(endpoint), tokens: tokens}
	}
	return &mcp.StreamableClientTransport{
		Endpoint: u.cfg.URL,
		HTTPClient: &http.Client{Transport: &boundedTransport{
			base:     base,
			server:   u.cfg.Name,
			limit:    limit,
			log:      u.log,
			stats:    &u.output,
			refusals: &u.refusals,
		}},
		// The SDK's own bound on an event fails the whole connection; boundedTransport
		// replaces an event over the limit before the SDK sees it, so the SDK's is set above.
		MaxEventSize: int(limit) + readChunk,
	}, nil
}

// headersFromEnv resolves headers_env: header name → name of the environment variable that
// holds its value. A variable that is unset or empty is an error naming it.
func headersFromEnv(names map[string]string) (http.Header, error) {
	header := make(http.Header, len(names))
	for _, name := range slices.Sorted(maps.Keys(names)) {
		variable := names[name]
		value := os.Getenv(variable)
		if value == "" {
			return nil, fmt.Errorf("header %s takes its value from environment variable %s, which is not set", name, variable)
		}
		header.Set(name, value)
	}
	return header, nil
}

// headerTransport adds the configured headers to the requests it carries to the server's own
// origin, and to no other: a redirect elsewhere never receives the credentials.
type headerTransport struct {
	base   http.RoundTripper
	origin string
	header http.Header
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.header) == 0 || origin(req.URL) != t.origin {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context()) // a RoundTripper must not modify the caller's request
	for name, values := range t.header {
		req.Header[name] = slices.Clone(values)
	}
	return t.base.RoundTrip(req)
}

func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }
