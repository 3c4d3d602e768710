package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"
)

// maxReportedCount bounds every number a provider reports in its usage (a token count, a cost in
// USD): no request uses a trillion tokens or costs a trillion dollars, and counts under it
// cannot overflow when a run adds them up.
const maxReportedCount = 1e12

// impossibleUsage finds a number no request can report in the usage of a provider's JSON answer
// or of one event of its stream: any number under a key named "usage", at any depth (Messages'
// usage.iterations and a stream's message.usage included), must be from 0 to
// maxReportedCount. The error names the field and its value, never the rest of the body; nil
// when every number is possible or data is not JSON (the wire reports that).
func impossibleUsage(data []byte) error {
	if !bytes.Contains(data, []byte(`"usage"`)) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	path, value := findImpossible(v, "", false, 0)
	if path == "" {
		return nil
	}
	return fmt.Errorf("the answer reports %s %s, which no request can use or cost (a usage count or cost is from 0 to 10^12); the request counts as failed so that the run's budgets stay sound",
		path, truncateText(value, 30))
}

// findImpossible walks v (decoded with UseNumber), at path, for the first impossible usage
// number in key order; inUsage says v is under a "usage" key.
func findImpossible(v any, path string, inUsage bool, depth int) (string, string) {
	if depth > 64 {
		return "", ""
	}
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if p, val := findImpossible(v[k], p, inUsage || k == "usage", depth+1); p != "" {
				return p, val
			}
		}
	case []any:
		for i, el := range v {
			if p, val := findImpossible(el, path+"["+strconv.Itoa(i)+"]", inUsage, depth+1); p != "" {
				return p, val
			}
		}
	case json.Number:
		if !inUsage {
			return "", ""
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || !(f >= 0 && f <= maxReportedCount) {
			return path, string(v)
		}
	}
	return "", ""
}

// impossible says which field of u no request can report (negative, or a cost that is not a
// finite number), or "".
func (u Usage) impossible() string {
	for _, f := range []struct {
		name string
		v    int
	}{{"input_tokens", u.InputTokens}, {"output_tokens", u.OutputTokens}, {"cache_read_tokens", u.CacheReadTokens}, {"cache_write_tokens", u.CacheWriteTokens}} {
		if f.v < 0 || f.v > maxReportedCount {
			return fmt.Sprintf("%s %d", f.name, f.v)
		}
	}
	if c := u.CostUSD; !(c >= 0) || math.IsInf(c, 1) {
		return fmt.Sprintf("cost_usd %g", c)
	}
	return ""
}

// checkUsage fails a result whose usage no request can have: the run would count it into its
// budgets.
func checkUsage(res *Result) error {
	if bad := res.Usage.impossible(); bad != "" {
		return fmt.Errorf("the answer's usage holds %s, which no request can use or cost; the request counts as failed so that the run's budgets stay sound", bad)
	}
	return nil
}

// estimateUsage fills in the tokens of an answer whose provider reported none (no usage object,
// a stream without its usage chunk): one token per four characters of what the call sends and
// of the answer, as the scripted provider counts, so that max_tokens_total still counts the
// request. It says so in the answer's warnings.
func estimateUsage(c *Call, res *Result) {
	if res.Usage.InputTokens != 0 || res.Usage.OutputTokens != 0 {
		return
	}
	in, out := callChars(c), 0
	for _, b := range res.Blocks {
		out += utf8.RuneCountInString(b.Text)
		if b.ToolCall != nil {
			out += utf8.RuneCountInString(b.ToolCall.Name) + len(b.ToolCall.Arguments)
		}
	}
	if in == 0 && out == 0 {
		return
	}
	res.Usage.InputTokens, res.Usage.OutputTokens = tokens(in), tokens(out)
	res.Evidence.Warnings = append(res.Evidence.Warnings, fmt.Sprintf(
		"the provider reported no usage for this request: its tokens were estimated at one per four characters (%d input, %d output), so that max_tokens_total counts it",
		res.Usage.InputTokens, res.Usage.OutputTokens))
}
