package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/client/rp"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// jwtServiceStorage is zitadel/oidc's example storage with the access tokens of its service
// user sid1 (secret verysecret, client credentials grant) issued as JWTs, so that a resource
// server can check them with the provider's keys.
type jwtServiceStorage struct{ *storage.Storage }

func (s jwtServiceStorage) ClientCredentials(ctx context.Context, clientID, clientSecret string) (op.Client, error) {
	c, err := s.Storage.ClientCredentials(ctx, clientID, clientSecret)
	if err != nil {
		return nil, err
	}
	return jwtAccessTokens{c}, nil
}

type jwtAccessTokens struct{ op.Client }

func (jwtAccessTokens) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

// TestUpstreamGetsItsOwnTokenAndNeverTheClients: the gateway, called by a client with its bearer
// token, calls an HTTP upstream with a token of its own from the upstream's authorization
// server (client credentials at a real OpenID provider); every request the upstream sees carries
// that token and nothing of the client's. The client secret is in no log, no answer of /admin
// and no audit record.
func TestUpstreamGetsItsOwnTokenAndNeverTheClients(t *testing.T) {
	const clientToken = "e2e-downstream-token-3b9d27e1f0"
	const clientSecret = "verysecret" // the example storage's service user sid1
	t.Setenv("E2E_OAUTH_PLANNER_TOKEN", clientToken)
	t.Setenv("E2E_CLOUD_CLIENT_SECRET", clientSecret)

	// The OpenID provider, counting the requests to its token endpoint.
	opServer := httptest.NewUnstartedServer(nil)
	issuer := "http://" + opServer.Listener.Addr().String()
	provider := exampleop.SetupServer(issuer, jwtServiceStorage{storage.NewStorage(storage.NewUserStore(issuer))}, nil, false)
	var mu sync.Mutex
	tokenRequests := 0
	opServer.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" {
			mu.Lock()
			tokenRequests++
			mu.Unlock()
		}
		provider.ServeHTTP(w, r)
	})
	opServer.Start()
	t.Cleanup(opServer.Close) // after the gateway's stop, a cleanup registered later

	// The upstream: an MCP server that takes only tokens the provider signed, and records the
	// headers of every request.
	srv := mcp.NewServer(&mcp.Implementation{Name: "cloud", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "move", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "moved for " + auth.TokenInfoFromContext(ctx).UserID}}}, nil
	})
	verifier := op.NewAccessTokenVerifier(issuer, rp.NewRemoteKeySet(http.DefaultClient, issuer+"/keys"))
	protect := auth.RequireBearerToken(func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		claims, err := op.VerifyAccessToken[*oidc.AccessTokenClaims](ctx, token, verifier)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		return &auth.TokenInfo{UserID: claims.Subject, Scopes: claims.Scopes, Expiration: claims.Expiration.AsTime()}, nil
	}, nil)
	handler := protect(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	var seen []http.Header
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(upstream.Close)

	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
auth:
  tokens:
    - {principal: planner, roles: [agent], token_env: E2E_OAUTH_PLANNER_TOKEN}
servers:
  - name: cloud
    url: "`+upstream.URL+`/mcp"
    contract: passthrough
    oauth:
      token_url: "`+issuer+`/oauth/token"
      client_id: sid1
      client_secret_env: E2E_CLOUD_CLIENT_SECRET
      scopes: [`+storage.CustomScope+`]
`)
	cliOK(t, "check", "-c", cfg)
	gw := startGateway(t, cfg, addr)
	cs := connectHTTPAs(t, addr, clientToken, nil)
	for range 3 {
		res, _ := call(t, cs, "cloud__move", map[string]any{"to": "bench"})
		if res.IsError || textOf(res) != "moved for sid1" {
			t.Fatalf("cloud__move: %s", mustJSON(res))
		}
	}

	mu.Lock()
	headers, requests := seen, tokenRequests
	mu.Unlock()
	if requests != 1 {
		t.Errorf("%d token requests for the start and 3 calls, want 1", requests)
	}
	if len(headers) == 0 {
		t.Fatal("no request reached the upstream")
	}
	var gatewayToken string
	for i, h := range headers {
		v := h.Get("Authorization")
		if !strings.HasPrefix(v, "Bearer ey") || (gatewayToken != "" && v != gatewayToken) {
			t.Errorf("upstream request %d carried Authorization %.20q…, want the gateway's one JWT", i, v)
		}
		gatewayToken = v
		for name, values := range h {
			for _, value := range values {
				if strings.Contains(value, clientToken) {
					t.Errorf("upstream request %d carried the client's token in %s", i, name)
				}
			}
		}
	}

	admin := strings.TrimSpace(readFile(t, filepath.Join(cfgDir(cfg), ".mcp-gateway", "admin.token")))
	eff := do(t, "GET", "http://"+addr+"/admin/config", map[string]string{"Authorization": "Bearer " + admin}, "")
	if eff.code != 200 || !strings.Contains(eff.body, `"client_secret_env": "E2E_CLOUD_CLIENT_SECRET"`) {
		t.Errorf("/admin/config: HTTP %d %s", eff.code, eff.body)
	}
	recs := auditJSONL(t, "-c", cfg, "--tool", "cloud__move")
	if len(recs) != 3 || recs[0].Principal != "planner" {
		t.Errorf("audit records: %+v", recs)
	}
	time.Sleep(100 * time.Millisecond) // the log lines of the last call
	for what, text := range map[string]string{"the gateway's log": gw.stderr.String(), "/admin/config": eff.body, "the audit log": mustJSON(recs)} {
		for _, secret := range []string{clientSecret, strings.TrimPrefix(gatewayToken, "Bearer "), clientToken} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds a secret (%.10s…)", what, secret)
			}
		}
	}
}
