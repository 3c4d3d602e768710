package config

import (
	"bytes"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// checkPolicies applies the defaults of the policies section, resolves its files against the
// config's directory and records where each inline rule's expression starts, so that a CEL
// error inside it can be reported at its line and column in this file.
func (d *decoder) checkPolicies(cfg *Config, dir string) {
	p := &cfg.Policies
	src := d.src[p]
	if src == nil {
		src = &source{}
	}
	loc := location{path: "policies"}
	d.enum(src, loc, "default", &p.Default, "allow", "allow", "deny")
	if !src.has("cost_limit") {
		p.CostLimit = 10000
	} else if src.valid("cost_limit") && p.CostLimit == 0 {
		d.errorf(src.valueLine("cost_limit"), loc.field("cost_limit"), "must be at least 1")
	}
	files := d.src[&p.Files]
	for i, f := range p.Files {
		if strings.TrimSpace(f) == "" && files.itemOK(i) {
			d.errorf(files.itemLine(i, 0), loc.field("files").index(i, ""), "is empty; name a policy file")
			continue
		}
		p.Files[i] = resolve(dir, f)
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		r.File = cfg.Path
		rs := d.src[r]
		if rs == nil {
			continue
		}
		if e, ok := rs.keys["when"]; ok && e.value != nil {
			r.Line, r.Column = d.textStart(d.resolve(e.value))
		}
	}
}

// textStart is where a scalar's text begins: after the opening quote of a quoted scalar, and on
// the next line, after its indentation, for a block scalar (| or >).
func (d *decoder) textStart(n *yaml.Node) (line, col int) {
	if n == nil {
		return 0, 0
	}
	switch {
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		lines := bytes.Split(d.data, []byte("\n"))
		if n.Line < len(lines) {
			next := lines[n.Line] // the line after the indicator (Line is 1-based)
			return n.Line + 1, len(next) - len(bytes.TrimLeft(next, " ")) + 1
		}
		return n.Line + 1, 1
	case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0:
		return n.Line, n.Column + 1
	default:
		return n.Line, n.Column
	}
}

func (d *decoder) checkApprovals(a *Approvals) {
	src := d.src[a]
	if src == nil {
		src = &source{}
	}
	loc := location{path: "approvals"}
	d.enum(src, loc, "use", &a.Use, "console", "console", "memory", "webhook", "callback")
	if src.has("use") {
		a.UseLine = src.valueLine("use")
	}
	switch {
	case !src.has("timeout"):
		a.Timeout = Duration(DefaultApprovalTimeout)
	case src.valid("timeout") && time.Duration(a.Timeout) <= 0:
		d.errorf(src.valueLine("timeout"), loc.field("timeout"), "must be a positive duration such as 5m")
	}
	wsrc := d.src[&a.Webhook]
	if wsrc == nil {
		wsrc = &source{}
	}
	wloc := loc.field("webhook")
	switch {
	case !wsrc.has("timeout"):
		a.Webhook.Timeout = Duration(DefaultWebhookTimeout)
	case wsrc.valid("timeout") && (a.Webhook.Timeout <= 0 || time.Duration(a.Webhook.Timeout) > MaxWebhookTimeout):
		d.errorf(wsrc.valueLine("timeout"), wloc.field("timeout"), "is %s; it must be a positive duration of at most a minute, such as 10s",
			time.Duration(a.Webhook.Timeout))
	}
	switch {
	case a.Use == "webhook" && a.Webhook.URL == "":
		d.errorf(src.lineOf("use"), loc.field("use"), "is webhook, so approvals.webhook.url is required")
	case a.Webhook.URL != "":
		if msg := checkURL(a.Webhook.URL); msg != "" {
			d.errorf(wsrc.valueLine("url"), wloc.field("url"), "%s", msg)
		}
	}
}
