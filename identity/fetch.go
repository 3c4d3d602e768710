package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// Bounds of what the gateway fetches from an issuer.
const (
	// maxDocumentBytes bounds a discovery document or a key set. Real ones are a few KB.
	maxDocumentBytes = 1 << 20
	// fetchTimeout bounds one fetch of the discovery document and the key set together.
	fetchTimeout = 10 * time.Second
	// maxRedirects bounds the redirects a fetch follows.
	maxRedirects = 3
)

// newHTTPClient is the client of a Verifier that was given none: each fetch bounded in time,
// redirects to http:// refused but for a loopback host.
func newHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSHandshakeTimeout = fetchTimeout
	t.ResponseHeaderTimeout = fetchTimeout
	t.MaxResponseHeaderBytes = 64 << 10
	return &http.Client{Transport: t, Timeout: fetchTimeout, CheckRedirect: checkRedirect}
}

func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("more than %d redirects", maxRedirects)
	}
	if msg := checkFetchURL(req.URL); msg != "" {
		return fmt.Errorf("redirected to %s, which %s", req.URL.Redacted(), msg)
	}
	return nil
}

// checkFetchURL returns why the gateway will not fetch keys from u, or "".
func checkFetchURL(u *url.URL) string {
	switch {
	case u.Scheme == "https":
		return ""
	case u.Scheme == "http" && config.LoopbackHost(u.Hostname()):
		return ""
	case u.Scheme == "http":
		return "is http:// to a host other than loopback: anyone on the way could hand the gateway their own keys"
	default:
		return "is not an https:// URL"
	}
}

// metadata is what the gateway reads of an issuer's discovery document.
type metadata struct {
	Issuer  string `json:"issuer"`
	JWKSURI string `json:"jwks_uri"`
}

// discoveryURLs are where issuer's metadata is looked for, in order: OpenID Connect Discovery
// (the issuer, then /.well-known/openid-configuration) and RFC 8414 (the well-known path
// inserted between the host and the issuer's path).
func discoveryURLs(issuer string) []string {
	oidc := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	u, err := url.Parse(issuer)
	if err != nil {
		return []string{oidc}
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	oauth := u.Scheme + "://" + u.Host + "/.well-known/oauth-authorization-server" + path
	return []string{oidc, oauth}
}

// discover reads the issuer's metadata: the first discovery document found, which must name
// the issuer exactly (OpenID Connect Discovery §4.3, RFC 8414 §3.3) and a jwks_uri the gateway
// may fetch.
func discover(ctx context.Context, hc *http.Client, issuer string) (*metadata, error) {
	var failures []string
	for _, u := range discoveryURLs(issuer) {
		body, status, err := get(ctx, hc, u)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", u, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if status != http.StatusOK {
			failures = append(failures, fmt.Sprintf("%s: HTTP %d", u, status))
			continue
		}
		var md metadata
		if err := json.Unmarshal(body, &md); err != nil {
			return nil, fmt.Errorf("%s is not a JSON discovery document: %v", u, err)
		}
		if md.Issuer != issuer {
			return nil, fmt.Errorf("%s names issuer %q, not %q as auth.oidc.issuer says; the issuer must be written exactly as the provider names itself (mind a trailing /)",
				u, clip(md.Issuer, 200), issuer)
		}
		if md.JWKSURI == "" {
			return nil, fmt.Errorf("%s has no jwks_uri: the provider publishes no keys to check its tokens with", u)
		}
		ju, err := url.Parse(md.JWKSURI)
		if err != nil || ju.Host == "" {
			return nil, fmt.Errorf("%s names jwks_uri %q, which is not a URL", u, clip(md.JWKSURI, 200))
		}
		if msg := checkFetchURL(ju); msg != "" {
			return nil, fmt.Errorf("%s names jwks_uri %s, which %s", u, ju.Redacted(), msg)
		}
		return &md, nil
	}
	return nil, fmt.Errorf("no discovery document: %s", strings.Join(failures, "; "))
}

// fetchKeys reads the key set at jwksURI.
func fetchKeys(ctx context.Context, hc *http.Client, jwksURI string) (*keySet, []string, error) {
	body, status, err := get(ctx, hc, jwksURI)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", jwksURI, err)
	}
	if status != http.StatusOK {
		return nil, nil, fmt.Errorf("%s: HTTP %d", jwksURI, status)
	}
	ks, skipped, err := parseKeySet(body)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", jwksURI, err)
	}
	return ks, skipped, nil
}

// get fetches u, reading at most maxDocumentBytes of its body.
func get(ctx context.Context, hc *http.Client, u string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is said by the caller
		}
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("reading the answer: %v", err)
	}
	if len(body) > maxDocumentBytes {
		return nil, 0, fmt.Errorf("the answer is larger than %d bytes", maxDocumentBytes)
	}
	return body, resp.StatusCode, nil
}
