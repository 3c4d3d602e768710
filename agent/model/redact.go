package model

import (
	"sort"
	"strings"
)

// redactor removes secrets from text a provider or the network stack wrote: the API key and the
// values of the configured headers (headers_env). Values shorter than minSecret are left: they
// would blank out ordinary words, and are no secrets.
type redactor []string

// minSecret is the length under which a header value is not redacted.
const minSecret = 4

func newRedactor(values ...string) redactor {
	var r redactor
	for _, v := range values {
		if len(v) >= minSecret {
			r = append(r, v)
		}
	}
	// The longest first, so that a secret containing another is removed whole.
	sort.Slice(r, func(i, j int) bool { return len(r[i]) > len(r[j]) })
	return r
}

// redacted replaces a secret in a text.
const redacted = "[REDACTED]"

// ellipsis ends a text cut short for a message (truncateText).
const ellipsis = "…"

// text removes every secret from s, written as is or with \u escapes (\u002d), and the start
// of one (minSecret characters or more) just before an ellipsis: a provider's text cut short for
// a message may end inside a secret, which the whole secret no longer matches.
func (r redactor) text(s string) string {
	if strings.Contains(s, `\u`) {
		// A secret written with \u escapes (a JSON string quoted once more) is one too.
		if d := decodeEscapes(s); r.holds(d) {
			s = d
		}
	}
	for _, v := range r {
		s = strings.ReplaceAll(s, v, redacted)
	}
	if len(r) == 0 || !strings.Contains(s, ellipsis) {
		return s
	}
	var b strings.Builder
	for {
		before, after, cut := strings.Cut(s, ellipsis)
		if n := r.cutSecret(before); n > 0 {
			before = before[:len(before)-n] + redacted
		}
		b.WriteString(before)
		if !cut {
			return b.String()
		}
		b.WriteString(ellipsis)
		s = after
	}
}

// holds says whether s contains a secret.
func (r redactor) holds(s string) bool {
	for _, v := range r {
		if strings.Contains(s, v) {
			return true
		}
	}
	return false
}

// cutSecret is the length of the longest end of s that is the start of a secret, at least
// minSecret long; 0 when none is.
func (r redactor) cutSecret(s string) int {
	n := 0
	for _, v := range r {
		for k := min(len(v), len(s)); k >= minSecret && k > n; k-- {
			if strings.HasSuffix(s, v[:k]) {
				n = k
				break
			}
		}
	}
	return n
}

// err returns err with every secret removed from its text; errors.Is and errors.As still see
// the errors it wraps.
func (r redactor) err(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := r.text(msg); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}

// result removes secrets from what a provider wrote into an answer besides the model's output:
// its error, its refusal reason and category, and the evidence (request id, model, warnings),
// which the transcript, the printout and the audit chain keep.
func (r redactor) result(res *Result) {
	if len(r) == 0 || res == nil {
		return
	}
	res.Error = r.text(res.Error)
	res.RefusalReason = r.text(res.RefusalReason)
	res.RefusalCategory = r.text(res.RefusalCategory)
	res.Evidence.RequestID = r.text(res.Evidence.RequestID)
	res.Evidence.Model = r.text(res.Evidence.Model)
	for i, w := range res.Evidence.Warnings {
		res.Evidence.Warnings[i] = r.text(w)
	}
}

// redactedError is an error whose text had secrets removed.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
