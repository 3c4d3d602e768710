package guards

import (
	"context"
	"strings"

	"go.yaml.in/yaml/v3"
)

// secrets.scan finds credentials and blocks by default. Detectors, in priority order (an earlier
// one keeps a stretch a later one also matches, so the value of password=AKIA… is an AWS key and
// an Anthropic key is never also an OpenAI key):
//
//	private_key            -----BEGIN … PRIVATE KEY----- through its END line (or, cut short,
//	                       through the base64 body)
//	aws_access_key         (AKIA|ASIA)[A-Z0-9]{16}
//	github_token           (ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}, github_pat_[A-Za-z0-9_]{22,}
//	slack_token            xox[abprs]-[A-Za-z0-9-]{10,}
//	anthropic_key          sk-ant-[A-Za-z0-9_-]{20,}
//	openai_key             sk-[A-Za-z0-9_-]{20,} holding a digit and a letter (sk-proj-…,
//	                       sk-svcacct-…), never sk-ant-…
//	google_api_key         AIza[A-Za-z0-9_-]{35}
//	jwt                    eyJ…​.…​.… : three base64url segments (the last may be empty), the
//	                       first two at least ten characters long
//	credential_assignment  the value (only) of KEY = value, KEY: value, "KEY": "value" where KEY
//	                       ends in password, passwd, passphrase, secret, token, api_key, apikey,
//	                       access_key, secret_key, private_key or authorization (any case); the
//	                       value is at least four characters and not a placeholder such as
//	                       ${VAR}, $VAR, <value>, [SECRET], {{var}}, **** or null
//
// Tokens must not touch a letter or digit on either side.

// SecretsSettings are the settings of secrets.scan.
type SecretsSettings struct {
	// Kinds limits the detectors; empty means all.
	Kinds []string `yaml:"kinds" json:"kinds,omitempty" jsonschema:"description=Which kinds to find: private_key\\, aws_access_key\\, github_token\\, slack_token\\, anthropic_key\\, openai_key\\, google_api_key\\, jwt\\, credential_assignment (default all)."`
	// Replacement is the redaction text, used with action: redact.
	Replacement *string `yaml:"replacement" json:"replacement,omitempty" jsonschema:"description=Redaction text used with action: redact (default [SECRET])."`
}

type secretDetector struct {
	kind   string
	minLen int // the shortest text the detector can match, so short leaves are skipped at once
	find   func(text string) []Span
}

// secretDetectors are the detectors in priority order.
var secretDetectors = []secretDetector{
	{"private_key", 35, findPrivateKeys},
	{"aws_access_key", 20, findAWSKeys},
	{"github_token", 33, findGitHubTokens},
	{"slack_token", 15, findSlackTokens},
	{"anthropic_key", 27, findAnthropicKeys},
	{"openai_key", 23, findOpenAIKeys},
	{"google_api_key", 39, findGoogleKeys},
	{"jwt", 23, findJWTs},
	{"credential_assignment", 6, findCredentialAssignments},
}

type secrets struct {
	detectors   []secretDetector
	replacement string
}

func newSecrets(node *yaml.Node) (Guard, error) {
	var s SecretsSettings
	if err := decodeSettings(node, &s); err != nil {
		return nil, err
	}
	var errs SettingErrors
	names := make([]string, len(secretDetectors))
	for i, d := range secretDetectors {
		names[i] = d.kind
	}
	want := map[string]bool{}
	for i, k := range s.Kinds {
		if _, ok := detectorIndex(k); !ok {
			errs.add(itemLine(node, "kinds", i), "unknown kind %q%s", k, suggestion(k, names))
		}
		want[k] = true
	}
	g := &secrets{replacement: "[SECRET]"}
	if s.Replacement != nil {
		g.replacement = *s.Replacement
	}
	for _, d := range secretDetectors {
		if len(s.Kinds) == 0 || want[d.kind] {
			g.detectors = append(g.detectors, d)
		}
	}
	return g, errs.err()
}

func detectorIndex(kind string) (int, bool) {
	for i, d := range secretDetectors {
		if d.kind == kind {
			return i, true
		}
	}
	return 0, false
}

func (g *secrets) DefaultAction() Action { return ActionBlock }
func (g *secrets) Stages() []Stage       { return allStages }

func (g *secrets) Redact(text string, spans []Span) string {
	return Redact(text, spans, fixed(g.replacement))
}

func (*secrets) pollsContext() {}

func (g *secrets) Scan(_ context.Context, text string) ([]Span, error) {
	var found []Span
	for _, d := range g.detectors {
		if len(text) >= d.minLen {
			found = claim(found, d.find(text))
		}
	}
	return found, nil
}

func secretSpan(start, end int, kind string) Span {
	return Span{Start: start, End: end, Category: kind}
}

// countWhile counts the bytes from i on that satisfy ok.
func countWhile(s string, i int, ok func(byte) bool) int {
	n := 0
	for i+n < len(s) && ok(s[i+n]) {
		n++
	}
	return n
}

// eachIndex calls f with every offset of sub in s, left to right; f returns where to look next.
func eachIndex(s, sub string, f func(p int) int) {
	for i := 0; i < len(s); {
		k := strings.Index(s[i:], sub)
		if k < 0 {
			return
		}
		i = max(f(i+k), i+k+1)
	}
}

func isPEMBody(c byte) bool {
	return isAlnum(c) || c == '+' || c == '/' || c == '=' || c == ':' || c == ',' || c == '-' ||
		c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\\'
}

func findPrivateKeys(text string) []Span {
	const begin = "-----BEGIN "
	var out []Span
	eachIndex(text, begin, func(p int) int {
		labelStart := p + len(begin)
		e := strings.Index(text[labelStart:min(len(text), labelStart+72)], "-----")
		if e < 0 {
			return labelStart
		}
		label := text[labelStart : labelStart+e]
		if !strings.HasSuffix(label, "PRIVATE KEY") && !strings.HasSuffix(label, "PRIVATE KEY BLOCK") {
			return labelStart
		}
		end := labelStart + e + 5
		for end < len(text) && isPEMBody(text[end]) && !strings.HasPrefix(text[end:], "-----") {
			end++
		}
		if marker := "-----END " + label + "-----"; strings.HasPrefix(text[end:], marker) {
			end += len(marker)
		} else {
			for end > p && strings.IndexByte(" \t\r\n\\", text[end-1]) >= 0 {
				end--
			}
		}
		out = append(out, secretSpan(p, end, "private_key"))
		return end
	})
	return out
}

func isUpperAlnum(c byte) bool { return isDigit(c) || 'A' <= c && c <= 'Z' }

func findAWSKeys(text string) []Span {
	var out []Span
	eachIndex(text, "IA", func(q int) int {
		p := q - 2
		if p < 0 || text[p] != 'A' || text[p+1] != 'K' && text[p+1] != 'S' || isAlnum(before(text, p)) {
			return q + 2
		}
		if countWhile(text, p+4, isUpperAlnum) != 16 || isAlnum(at(text, p+20)) {
			return q + 2
		}
		out = append(out, secretSpan(p, p+20, "aws_access_key"))
		return p + 20
	})
	return out
}

func isWordByte(c byte) bool { return isAlnum(c) || c == '_' }

func findGitHubTokens(text string) []Span {
	var classic, fine []Span
	eachIndex(text, "gh", func(p int) int {
		if isAlnum(before(text, p)) || p+4 > len(text) || strings.IndexByte("pousr", text[p+2]) < 0 || text[p+3] != '_' {
			return p + 2
		}
		if n := countWhile(text, p+4, isAlnum); n >= 36 && n <= 255 && at(text, p+4+n) != '_' {
			classic = append(classic, secretSpan(p, p+4+n, "github_token"))
			return p + 4 + n
		}
		return p + 2
	})
	eachIndex(text, "github_pat_", func(p int) int {
		if isAlnum(before(text, p)) {
			return p + 11
		}
		if n := countWhile(text, p+11, isWordByte); n >= 22 {
			fine = append(fine, secretSpan(p, p+11+n, "github_token"))
			return p + 11 + n
		}
		return p + 11
	})
	return claim(classic, fine)
}

func isAlnumDash(c byte) bool { return isAlnum(c) || c == '-' }

func findSlackTokens(text string) []Span {
	var out []Span
	eachIndex(text, "xox", func(p int) int {
		if isAlnum(before(text, p)) || p+5 > len(text) || strings.IndexByte("abprs", text[p+3]) < 0 || text[p+4] != '-' {
			return p + 3
		}
		if n := countWhile(text, p+5, isAlnumDash); n >= 10 {
			out = append(out, secretSpan(p, p+5+n, "slack_token"))
			return p + 5 + n
		}
		return p + 3
	})
	return out
}

func findAnthropicKeys(text string) []Span {
	var out []Span
	eachIndex(text, "sk-ant-", func(p int) int {
		if isAlnum(before(text, p)) {
			return p + 7
		}
		if n := countWhile(text, p+7, isB64URL); n >= 20 {
			out = append(out, secretSpan(p, p+7+n, "anthropic_key"))
			return p + 7 + n
		}
		return p + 7
	})
	return out
}

func findOpenAIKeys(text string) []Span {
	var out []Span
	eachIndex(text, "sk-", func(p int) int {
		if isAlnum(before(text, p)) || strings.HasPrefix(text[p:], "sk-ant-") {
			return p + 3
		}
		n := countWhile(text, p+3, isB64URL)
		if n < 20 {
			return p + 3
		}
		body := text[p+3 : p+3+n]
		if strings.IndexFunc(body, func(r rune) bool { return '0' <= r && r <= '9' }) < 0 ||
			strings.IndexFunc(body, func(r rune) bool { return 'a' <= r|0x20 && r|0x20 <= 'z' }) < 0 {
			return p + 3 + n
		}
		out = append(out, secretSpan(p, p+3+n, "openai_key"))
		return p + 3 + n
	})
	return out
}

func findGoogleKeys(text string) []Span {
	var out []Span
	eachIndex(text, "AIza", func(p int) int {
		if isAlnum(before(text, p)) || countWhile(text, p+4, isB64URL) != 35 {
			return p + 4
		}
		out = append(out, secretSpan(p, p+39, "google_api_key"))
		return p + 39
	})
	return out
}

func findJWTs(text string) []Span {
	var out []Span
	eachIndex(text, "eyJ", func(p int) int {
		if b := before(text, p); isB64URL(b) || b == '.' {
			return p + 3
		}
		n1 := countWhile(text, p, isB64URL)
		if n1 < 10 || at(text, p+n1) != '.' {
			return p + n1
		}
		n2 := countWhile(text, p+n1+1, isB64URL)
		if n2 < 10 || at(text, p+n1+1+n2) != '.' {
			return p + n1
		}
		end := p + n1 + 1 + n2 + 1
		end += countWhile(text, end, isB64URL)
		out = append(out, secretSpan(p, end, "jwt"))
		return end
	})
	return out
}

// credentialKeys are the endings of keys whose values are credentials.
var credentialKeys = []string{
	"password", "passwd", "passphrase", "secret", "token", "authorization",
	"api_key", "apikey", "api-key", "access_key", "accesskey", "access-key",
	"secret_key", "secretkey", "secret-key", "private_key", "privatekey", "private-key",
}

func isKeyByte(c byte) bool { return isAlnum(c) || c == '_' || c == '-' || c == '.' }

func findCredentialAssignments(text string) []Span {
	var out []Span
	for o := 0; o < len(text); o++ {
		c := text[o]
		if c != '=' && c != ':' {
			continue
		}
		if start, end, ok := credentialValue(text, o); ok {
			out = append(out, secretSpan(start, end, "credential_assignment"))
			o = end - 1
		}
	}
	return out
}

// credentialValue reads KEY op VALUE around the operator at o and returns the value's offsets.
func credentialValue(text string, o int) (int, int, bool) {
	op := text[o]
	// The key ends at k: before the operator, or before the ':' of ':='.
	k := o
	if op == '=' && before(text, o) == ':' {
		k--
	} else if n := at(text, o+1); n == op || n == '>' || op == '=' && strings.IndexByte("=!<>", before(text, o)) >= 0 || op == ':' && before(text, o) == ':' {
		return 0, 0, false
	}
	// The key: back over blanks and one closing quote.
	for k > 0 && (text[k-1] == ' ' || text[k-1] == '\t') {
		k--
	}
	if b := before(text, k); b == '"' || b == '\'' {
		k--
	}
	ks := k
	for ks > 0 && o-ks < 64 && isKeyByte(text[ks-1]) {
		ks--
	}
	if ks == k || !credentialKey(text[ks:k]) {
		return 0, 0, false
	}
	// The value: after blanks, quoted or up to a delimiter.
	v := o + 1
	for v < len(text) && (text[v] == ' ' || text[v] == '\t') {
		v++
	}
	start, end := v, v
	if q := at(text, v); q == '"' || q == '\'' || q == '`' {
		start, end = v+1, v+1
		for end < len(text) && text[end] != q && text[end] != '\n' {
			if text[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(text) || text[end] != q {
			return 0, 0, false
		}
	} else {
		end = valueEnd(text, v)
		if scheme := text[start:end]; end < len(text) && text[end] == ' ' &&
			(strings.EqualFold(scheme, "bearer") || strings.EqualFold(scheme, "basic") || strings.EqualFold(scheme, "token")) {
			start = end + 1
			end = valueEnd(text, start)
		}
	}
	if !credentialLike(text[start:end]) {
		return 0, 0, false
	}
	return start, end, true
}

func valueEnd(text string, i int) int {
	for i < len(text) && strings.IndexByte(" \t\r\n&,;\"'`)]}<>", text[i]) < 0 {
		i++
	}
	return i
}

func credentialKey(key string) bool {
	for _, suffix := range credentialKeys {
		if hasSuffixFold(key, suffix) {
			return true
		}
	}
	return false
}

// credentialLike rejects values too short to be a credential and common placeholders.
func credentialLike(v string) bool {
	if len(v) < 4 {
		return false
	}
	switch {
	case strings.HasPrefix(v, "${"), strings.HasPrefix(v, "$("), strings.HasPrefix(v, "%("),
		strings.IndexByte("<[{", v[0]) >= 0:
		return false
	}
	if strings.Trim(v, "*xX•.-_") == "" || v[0] == '$' && strings.Trim(v[1:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == "" {
		return false
	}
	switch strings.ToLower(v) {
	case "null", "none", "true", "false", "undefined", "redacted", "hidden":
		return false
	}
	return true
}
