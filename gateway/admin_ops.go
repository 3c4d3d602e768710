package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// registerOpsRoutes adds the admin routes for restarting an upstream and reading the effective
// configuration.
func (g *Gateway) registerOpsRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /admin/upstreams/{server}/restart", func(w http.ResponseWriter, r *http.Request) {
		server := r.PathValue("server")
		operator := operatorOf(r, r.URL.Query().Get("operator"))
		if g.ups.Get(server) == nil {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no upstream server named %q", server))
			return
		}
		if err := g.RestartUpstream(r.Context(), server, operator); err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"restarted": server})
	})
	mux.HandleFunc("GET /admin/config", func(w http.ResponseWriter, r *http.Request) {
		eff, err := EffectiveConfig(g.config())
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, eff)
	})
}

// RestartUpstream stops an upstream and starts it again now, on an operator's word, and audits
// it. Calls in flight on it fail as if it crashed: on a physical server that locks out, since
// the robot was stopped part-way.
func (g *Gateway) RestartUpstream(ctx context.Context, server, operator string) error {
	u := g.ups.Get(server)
	if u == nil {
		return fmt.Errorf("no upstream server named %q is running", server)
	}
	rec := store.Record{Type: store.RecordOperator, Action: "restart", Principal: operator, Server: server}
	err := u.Restart(ctx)
	if err != nil {
		rec.Outcome, rec.Reason = "failed", err.Error()
	}
	if st := g.opts.Store; st != nil {
		if _, aerr := st.Audit().AppendSync(context.WithoutCancel(ctx), rec); aerr != nil {
			g.log.Error("audit record of an upstream restart not written", "server", server, "error", aerr)
		}
	}
	g.log.Warn("upstream restarted by an operator", "server", server, "operator", operator)
	if err != nil {
		return fmt.Errorf("restarting %s: %w", server, err)
	}
	return nil
}

// EffectiveConfig is the running configuration with every default filled in, as JSON, for
// operators. The file holds no credentials (only the names of the variables that do), but the
// values of a server's env may: they are replaced by "[REDACTED]", keys kept.
func EffectiveConfig(cfg *config.Config) (map[string]any, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	out["file"] = cfg.Path
	if servers, ok := out["servers"].([]any); ok {
		for _, s := range servers {
			if m, ok := s.(map[string]any); ok {
				if env, ok := m["env"].(map[string]any); ok {
					for k := range env {
						env[k] = "[REDACTED]"
					}
				}
			}
		}
	}
	// A guard's own settings are kept as YAML for the guard; show them as JSON.
	if rails, ok := out["guardrails"].(map[string]any); ok {
		stages := cfg.Guardrails.Stages()
		for stage, list := range rails {
			entries, _ := list.([]any)
			for i, e := range entries {
				m, ok := e.(map[string]any)
				if !ok || i >= len(stages[stage]) || stages[stage][i].Settings == nil {
					continue
				}
				var settings map[string]any
				if err := stages[stage][i].Settings.Decode(&settings); err == nil {
					for k, v := range settings {
						m[k] = v
					}
				}
			}
		}
	}
	return out, nil
}
