package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// The operator commands (status, unlock, audit) reach the gateway's state in one of two ways.
// The state file belongs to one process (SPEC.md §14), so they open it directly only when no
// gateway holds it; while a gateway runs they ask its admin API instead, which serves the same
// answers from the same store.

// adminTokenVar is the environment variable the operator commands read the admin token from.
const adminTokenVar = "MCP_GATEWAY_ADMIN_TOKEN"

// opsFlags are the flags every operator command shares, besides -c.
type opsFlags struct {
	addr  string
	token string
}

func addOpsFlags(fs *cmdFlags) *opsFlags {
	o := &opsFlags{}
	fs.addConfig(": gives state_dir and gateway.listen")
	fs.StringVar(&o.addr, "addr", "", "`HOST:PORT` of a running gateway's admin API, when it is not gateway.listen (a gateway started with --listen)")
	fs.StringVar(&o.token, "token", "", "admin bearer `TOKEN` (default: $"+adminTokenVar+", else the variable named by gateway.admin_token_env, else the token_env of an auth.tokens entry with role admin, else admin.token in state_dir); the environment is safer than the command line")
	return o
}

// errNoStateFile: the state file does not exist, so no gateway has run with this state_dir.
var errNoStateFile = errors.New("no state file")

// stateAccess is an operator command's way to the gateway's state: exactly one of st (the
// state file, no gateway running) and api (the running gateway's admin API) is set.
type stateAccess struct {
	st  *store.Store
	api *adminClient
}

// Close releases the state file if it was opened; every audit record appended is committed
// first.
func (a *stateAccess) Close() error {
	if a.st != nil {
		return a.st.Close()
	}
	return nil
}

// openState opens the state file in cfg's state_dir, read-only when readOnly. When a running
// gateway holds the file, it returns a client of that gateway's admin API instead, or an error
// that says how to reach it. When the file does not exist it returns an error wrapping
// errNoStateFile, and creates nothing.
func openState(cfg *config.Config, o *opsFlags, readOnly bool) (*stateAccess, error) {
	path := filepath.Join(cfg.Gateway.StateDir, store.FileName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s: no gateway has run with this state_dir yet", errNoStateFile, path)
	}
	st, err := store.Open(cfg.Gateway.StateDir, store.Options{ReadOnly: readOnly})
	if err == nil {
		return &stateAccess{st: st}, nil
	}
	var locked *store.LockedError
	if !errors.As(err, &locked) {
		return nil, err
	}
	api, err := newAdminClient(cfg, o, locked)
	if err != nil {
		return nil, err
	}
	return &stateAccess{api: api}, nil
}

// holder names who holds a locked state file, for messages.
func holder(e *store.LockedError) string {
	if e.Owner != nil && !e.Stale {
		return fmt.Sprintf("a running gateway (pid %d)", e.Owner.PID)
	}
	return "another process"
}

// adminClient calls a running gateway's /admin API. It never prints or logs the token; messages
// name where the token came from instead.
type adminClient struct {
	base        string // http://HOST:PORT
	token       string
	tokenSource string
	held        string // "state file X is held by a running gateway (pid N)"
	hc          *http.Client
}

func newAdminClient(cfg *config.Config, o *opsFlags, locked *store.LockedError) (*adminClient, error) {
	held := fmt.Sprintf("state file %s is held by %s", locked.Path, holder(locked))
	addr := o.addr
	if addr == "" {
		addr = cfg.Gateway.Listen
	}
	if addr == "" {
		return nil, fmt.Errorf("%s, which serves no HTTP (gateway.listen is \"\"), so its admin API cannot be reached; "+
			"stop that gateway and run this again, or restart it with --listen HOST:PORT and pass --addr HOST:PORT", held)
	}
	token, source, err := resolveToken(cfg, o)
	if err != nil {
		return nil, fmt.Errorf("%s; using its admin API needs the admin token: %w", held, err)
	}
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
		if cfg.Gateway.TLS != nil {
			base = "https://" + addr
		}
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: dialer.DialContext}
	if cfg.Gateway.TLS != nil && strings.HasPrefix(base, "https://") {
		// The gateway's own certificate, from gateway.tls.cert_file, is trusted at any address.
		u, _ := url.Parse(base)
		if tr.TLSClientConfig, err = gateway.ListenerClientTLS(cfg, u.Hostname()); err != nil {
			return nil, fmt.Errorf("%s; its admin API serves TLS: %w", held, err)
		}
	}
	return &adminClient{
		base:        strings.TrimSuffix(base, "/"),
		token:       token,
		tokenSource: source,
		held:        held,
		// No overall timeout: an unlock waits for the upstream's restart and an audit export
		// streams as long as the log is. The caller's context bounds both.
		hc: &http.Client{Transport: tr},
	}, nil
}

// resolveToken finds the admin token: --token, then $MCP_GATEWAY_ADMIN_TOKEN, then the variable
// named by gateway.admin_token_env, then the token_env of the first auth.tokens entry with role
// admin that is set, then admin.token in state_dir. The configured variables come before the file
// because a gateway configured with admin_token_env does not write the file, so a file found
// there may be left over from an earlier run. It returns where the token came from.
func resolveToken(cfg *config.Config, o *opsFlags) (token, source string, err error) {
	if o.token != "" {
		return o.token, "--token", nil
	}
	if t := strings.TrimSpace(os.Getenv(adminTokenVar)); t != "" {
		return t, "$" + adminTokenVar, nil
	}
	looked := "--token, $" + adminTokenVar
	env := cfg.Gateway.AdminTokenEnv
	if env != "" {
		if t := strings.TrimSpace(os.Getenv(env)); t != "" {
			return t, "$" + env + " (gateway.admin_token_env)", nil
		}
		looked += ", $" + env
	}
	for _, tok := range cfg.Auth.Tokens {
		if !slices.Contains(tok.Roles, config.RoleAdmin) {
			continue
		}
		if t := strings.TrimSpace(os.Getenv(tok.TokenEnv)); t != "" {
			return t, "$" + tok.TokenEnv + " (auth.tokens, principal " + tok.Principal + ")", nil
		}
		looked += ", $" + tok.TokenEnv
	}
	file := filepath.Join(cfg.Gateway.StateDir, AdminTokenFile)
	data, ferr := os.ReadFile(file)
	if t := strings.TrimSpace(string(data)); ferr == nil && t != "" {
		return t, file, nil
	}
	return "", "", fmt.Errorf("none found (looked at %s and %s)", looked, file)
}

// apiError is an answer of the admin API other than 2xx, with the gateway's message.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// do sends one request and returns the response when its status is 2xx; the caller closes its
// body. Any other status becomes an *apiError.
func (c *adminClient) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("admin API address %s: %w", c.base, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s, and its admin API at %s did not answer: %w; "+
			"if that gateway serves stdio only or listens elsewhere, restart it with --listen HOST:PORT and pass --addr HOST:PORT, or stop it",
			c.held, c.base, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(text))
	if json.Unmarshal(text, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		msg = fmt.Sprintf("the admin API at %s refused the admin token from %s (HTTP 401): %s", c.base, c.tokenSource, msg)
	case http.StatusForbidden:
		msg = fmt.Sprintf("the admin API at %s refused the token from %s (HTTP 403): %s", c.base, c.tokenSource, msg)
	}
	return nil, &apiError{status: resp.StatusCode, msg: msg}
}

// getJSON decodes the JSON answer of GET path into v.
func (c *adminClient) getJSON(ctx context.Context, path string, v any) error {
	return c.doJSON(ctx, http.MethodGet, path, nil, v)
}

// doJSON sends body as JSON and decodes the JSON answer into v.
func (c *adminClient) doJSON(ctx context.Context, method, path string, body, v any) error {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("reading the answer of the admin API at %s%s: %w", c.base, path, err)
	}
	return nil
}
