package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Limit is one rate or concurrency limit (the top-level `limits:` list): how many calls matching
// it a principal, a session, a server, a tool or everyone together may make per window, and how
// many may be in flight at once. Package limits enforces it, as the chain step right after the
// lockout check.
type Limit struct {
	// ID names the limit in refusals, metrics and audit records; unique, [A-Za-z0-9_.-]+.
	ID string `yaml:"id" json:"id" jsonschema:"pattern=^[A-Za-z0-9_.-]+$,description=Unique name of the limit in refusals\\, metrics and audit records."`
	// Match selects the calls the limit counts; an empty list matches every call.
	Match LimitMatch `yaml:"match" json:"match,omitempty" jsonschema:"description=Globs (path.Match) selecting the calls counted; an empty list matches all."`
	// Per is what has its own bucket: principal, session, server, tool (public name) or global.
	Per string `yaml:"per" json:"per,omitempty" jsonschema:"enum=principal,enum=session,enum=server,enum=tool,enum=global,description=What has its own counter (default global)."`
	// Rate is N/s, N/m or N/h: N calls per second, minute or hour, refilled continuously.
	Rate string `yaml:"rate" json:"rate,omitempty" jsonschema:"description=N/s\\, N/m or N/h; optional when concurrent is set."`
	// Burst is how many calls may come at once before the rate applies (default N of rate).
	Burst int `yaml:"burst" json:"burst,omitempty" jsonschema:"minimum=1,description=Calls that may come at once (default N of rate)."`
	// Concurrent caps the calls in flight per key; 0 is no cap.
	Concurrent int `yaml:"concurrent" json:"concurrent,omitempty" jsonschema:"minimum=0,description=Cap on calls in flight per key; 0: none."`
	// PhysicalOnly counts only calls to tools of physical servers.
	PhysicalOnly bool `yaml:"physical_only" json:"physical_only,omitempty" jsonschema:"description=Count only calls to tools of physical servers."`
	// Mode is enforce (refuse) or log_only (count would-be refusals, refuse nothing).
	Mode string `yaml:"mode" json:"mode,omitempty" jsonschema:"enum=enforce,enum=log_only,description=enforce refuses; log_only counts would-be refusals (default enforce)."`

	// Count and Window are Rate parsed (0 without a rate).
	Count  int           `yaml:"-" json:"-"`
	Window time.Duration `yaml:"-" json:"-"`
	// Line is where the limit starts in the file.
	Line int `yaml:"-" json:"-"`
}

// LimitMatch selects calls by globs; every given list must match.
type LimitMatch struct {
	Principals []string `yaml:"principals" json:"principals,omitempty" jsonschema:"description=Principal ids (globs)."`
	Roles      []string `yaml:"roles" json:"roles,omitempty" jsonschema:"description=The principal has one of these roles (globs)."`
	Servers    []string `yaml:"servers" json:"servers,omitempty" jsonschema:"description=Server names (globs)."`
	Tools      []string `yaml:"tools" json:"tools,omitempty" jsonschema:"description=Public tool names (globs)."`
}

// The values of Limit.Per and Limit.Mode.
const (
	PerPrincipal   = "principal"
	PerSession     = "session"
	PerServer      = "server"
	PerTool        = "tool"
	PerGlobal      = "global"
	LimitEnforce   = "enforce"
	LimitLogOnly   = "log_only"
	limitIDPattern = `^[A-Za-z0-9_.-]+$`
)

var (
	limitIDRE   = regexp.MustCompile(limitIDPattern)
	limitRateRE = regexp.MustCompile(`^\s*(\d+)\s*/\s*([smh])\s*$`)
)

// ParseRate parses "N/s", "N/m" or "N/h" with N ≥ 1.
func ParseRate(s string) (n int, window time.Duration, err error) {
	m := limitRateRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, fmt.Errorf("%q is not a rate: write N/s, N/m or N/h, such as 5/m", truncate(s))
	}
	n, err = strconv.Atoi(m[1])
	if err != nil || n < 1 || n > 1_000_000_000 {
		return 0, 0, fmt.Errorf("%q: the number of calls must be from 1 to 1000000000", truncate(s))
	}
	window = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[m[2]]
	return n, window, nil
}

// WindowName is a window as a refusal names it: "1s", "1m" or "1h".
func WindowName(w time.Duration) string {
	switch w {
	case time.Second:
		return "1s"
	case time.Minute:
		return "1m"
	case time.Hour:
		return "1h"
	}
	return strings.TrimSuffix(w.String(), "0s")
}

// checkLimits checks the limits list and fills in the defaults and the parsed rates.
func (d *decoder) checkLimits(cfg *Config) {
	seen := map[string]int{} // id -> line
	for i := range cfg.Limits {
		l := &cfg.Limits[i]
		src := d.src[l]
		if src == nil {
			continue // not a mapping, reported when decoding
		}
		l.Line = src.line
		loc := location{path: "limits"}.index(i, truncate(l.ID))
		switch {
		case !src.has("id"):
			d.errorf(src.line, loc, "id is missing; every limit needs a unique id")
		case !src.valid("id"):
		case !limitIDRE.MatchString(l.ID):
			d.errorf(src.valueLine("id"), loc, "id %q is not valid: use letters, digits, _, . and -", truncate(l.ID))
		default:
			if at, dup := seen[l.ID]; dup {
				d.errorf(src.valueLine("id"), loc, "duplicate limit id %q; the limit at line %d has it too", l.ID, at)
			} else {
				seen[l.ID] = src.valueLine("id")
			}
		}
		d.enum(src, loc, "per", &l.Per, PerGlobal, PerPrincipal, PerSession, PerServer, PerTool, PerGlobal)
		d.enum(src, loc, "mode", &l.Mode, LimitEnforce, LimitEnforce, LimitLogOnly)
		if src.valid("rate") && src.given("rate") {
			n, w, err := ParseRate(l.Rate)
			if err != nil {
				d.errorf(src.valueLine("rate"), loc.field("rate"), "%v", err)
			} else {
				l.Count, l.Window = n, w
			}
		}
		if src.valid("burst") && src.given("burst") {
			switch {
			case l.Burst < 1:
				d.errorf(src.valueLine("burst"), loc.field("burst"), "must be at least 1, got %d", l.Burst)
			case !src.given("rate"):
				d.errorf(src.lineOf("burst"), loc.field("burst"), "is only for a rate; add rate (such as 5/m) or remove burst")
			}
		} else if l.Count > 0 {
			l.Burst = l.Count
		}
		if src.valid("concurrent") && l.Concurrent < 0 {
			d.errorf(src.valueLine("concurrent"), loc.field("concurrent"), "must not be negative; write 0 or remove it for no cap")
		}
		if !src.given("rate") && l.Concurrent <= 0 && (!src.has("concurrent") || src.valid("concurrent")) {
			d.errorf(src.line, loc, "limits nothing: give rate (such as 5/m), concurrent (calls in flight), or both")
		}
		if d.src[&l.Match] != nil {
			mloc := loc.field("match")
			d.globs(l.Match.Principals, d.src[&l.Match.Principals], mloc.field("principals"))
			d.globs(l.Match.Roles, d.src[&l.Match.Roles], mloc.field("roles"))
			d.globs(l.Match.Servers, d.src[&l.Match.Servers], mloc.field("servers"))
			d.globs(l.Match.Tools, d.src[&l.Match.Tools], mloc.field("tools"))
		}
	}
}
