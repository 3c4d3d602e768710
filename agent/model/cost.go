package model

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// The values of Usage.CostSource.
const (
	CostFromHeader   = "header"
	CostFromProvider = "provider"
	CostFromPrices   = "prices"
	CostFromScript   = "scripted"
)

// pricer sets a Result's cost, in this order: the cost header a gateway
// reports (header, empty for none), the cost the answer itself reports
// (the body's, or a scripted reply's), else the price table by the model
// that answered, else by the model asked for. With a price table, a model
// it does not price is warned of in Evidence.Warnings, once per model.
type pricer struct {
	header string
	prices map[string]Price
	// reported is the CostSource of a cost the answer carries without
	// naming its source.
	reported string

	mu     sync.Mutex
	warned map[string]bool
}

func newPricer(s Settings, reported string) *pricer {
	p := &pricer{prices: s.Prices, reported: reported, warned: map[string]bool{}}
	switch s.CostHeader {
	case "":
		p.header = DefaultCostHeader
	case CostHeaderNone:
		p.header = ""
	default:
		p.header = s.CostHeader
	}
	return p
}

// CostHeaderNone is the cost_header value that reads no cost header.
const CostHeaderNone = "none"

// apply sets res.Usage.CostUSD and CostSource; asked is the model the call
// asked for. A cost header holding a cost no request has (negative, infinite
// or past 10^12 USD) is an error, so that max_cost_usd is never disabled by
// it; one that is not a decimal number (NaN, a hex float, text) is warned of
// and ignored.
func (p *pricer) apply(res *Result, header http.Header, asked string) error {
	u := &res.Usage
	if p.header != "" && header != nil {
		if v := strings.TrimSpace(header.Get(p.header)); v != "" {
			cost, err := parseCost(v)
			if err != nil {
				return fmt.Errorf("the cost header %s %w", p.header, err)
			}
			if cost >= 0 {
				u.CostUSD, u.CostSource = cost, CostFromHeader
				return nil
			}
			res.Evidence.Warnings = append(res.Evidence.Warnings,
				fmt.Sprintf("the cost header %s is not a decimal number of USD; it was ignored", p.header))
		}
	}
	if u.CostSource != "" {
		return nil // the wire read a cost and says from where
	}
	if u.CostUSD != 0 {
		u.CostSource = p.reported
		return nil
	}
	if len(p.prices) == 0 {
		return nil
	}
	answered := res.Evidence.Model
	price, ok := p.prices[answered]
	if !ok {
		price, ok = p.prices[asked]
	}
	if !ok {
		p.warn(res, answered, asked)
		return nil
	}
	u.CostUSD, u.CostSource = price.cost(*u), CostFromPrices
	return nil
}

// decimalCost is a cost written in decimal: digits with an optional fraction and exponent.
// Hex floats ("0x1p4"), "Inf", "NaN" and Go's digit separators are not costs.
var decimalCost = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// parseCost reads a cost header's value: the cost in USD, or -1 when the value is not a decimal
// number (a warning: a gateway's header that means something else), or an error when it is a
// number no request costs: negative, infinite, or past 10^12 USD (fail closed: such a header
// would otherwise count 0 and disable max_cost_usd).
func parseCost(v string) (float64, error) {
	f, _ := strconv.ParseFloat(v, 64) // a range error is ±Inf (or 0 for "1e-400")
	switch {
	case math.IsInf(f, 1):
		// "Inf", "1e309": a number too large to be a cost (ParseFloat's range error).
		return 0, fmt.Errorf("reports a cost too large for any request (%s); the request counts as failed so that max_cost_usd stays sound", truncateText(v, 30))
	case math.IsNaN(f) || !decimalCost.MatchString(v):
		return -1, nil
	case f < 0 || f > maxReportedCount: // -1e309 too
		return 0, fmt.Errorf("reports the cost %s, which no request can cost; the request counts as failed so that max_cost_usd stays sound", truncateText(v, 30))
	}
	return f, nil
}

// warn notes, the first time only, that neither the model that answered nor the one asked
// for has a price.
func (p *pricer) warn(res *Result, answered, asked string) {
	name := answered
	switch {
	case answered == "":
		name = asked
	case asked != "" && asked != answered:
		name = fmt.Sprintf("%s (nor %s, the model asked for)", answered, asked)
	}
	p.mu.Lock()
	first := !p.warned[name]
	p.warned[name] = true
	p.mu.Unlock()
	if first {
		res.Evidence.Warnings = append(res.Evidence.Warnings,
			fmt.Sprintf("no price for model %s in llm.prices: its requests count as costing 0 USD; add it to llm.prices", name))
	}
}

// cost prices u: input tokens neither read from nor written to the cache at
// Input, cached ones at CacheRead and CacheWrite, output at Output.
func (p Price) cost(u Usage) float64 {
	plain := max(u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens, 0)
	return (float64(plain)*p.Input + float64(u.CacheReadTokens)*p.CacheRead +
		float64(u.CacheWriteTokens)*p.CacheWrite + float64(u.OutputTokens)*p.Output) / 1e6
}

// pricedModel gives a Model without HTTP (scripted, mock) the cost rules of
// the HTTP providers: a cost the reply reports counts as "scripted", else
// the price table applies. It also fills in the invocation id.
type pricedModel struct {
	Model
	pricer *pricer
}

// Generate calls the wrapped model and prices its result.
func (m *pricedModel) Generate(ctx context.Context, c *Call) (*Result, error) {
	res, err := m.Model.Generate(ctx, c)
	if err != nil || res == nil {
		return res, err
	}
	if res.Evidence.InvocationID == "" {
		res.Evidence.InvocationID = InvocationID(ctx)
	}
	asked := ""
	if c != nil {
		asked = c.Controls.Model
	}
	if err := m.pricer.apply(res, nil, asked); err != nil {
		return nil, err
	}
	if err := checkUsage(res); err != nil {
		return nil, err
	}
	return res, nil
}

// truncateText shortens s to at most n bytes for a message, cutting between
// characters and ending it with an ellipsis. The redactor removes a secret's start just
// before that ellipsis, so provider text may be cut before it is redacted.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
