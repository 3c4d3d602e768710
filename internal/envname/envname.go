// Package envname tells an environment variable's name from a secret written where a name
// belongs. A config names the variables that hold its keys and header values (api_key_env,
// headers_env); a key pasted there by mistake must be refused without being repeated, and must
// never be looked up and then printed as a "variable that is not set".
package envname

import (
	"regexp"
	"strings"
	"unicode"
)

// nameRE is a variable name: letters, digits and _, not starting with a digit.
var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// keyPrefixes start credentials that are also valid variable names (those with a "-", such as
// sk-…, are not names at all): Groq, Hugging Face, xAI, GitHub, GitLab, Stripe-style and
// OpenAI-style underscored keys, AWS access key ids, Google API keys, Slack tokens.
var keyPrefixes = []string{"gsk_", "hf_", "xai_", "ghp_", "gho_", "ghs_", "ghu_", "github_pat_", "glpat_", "sk_", "rk_", "pk_", "AKIA", "ASIA", "AIza", "xox"}

// Valid reports whether name can name an environment variable and does not look like a
// credential: a name of letters, digits and _, not starting with a digit, that neither starts
// like a known key nor, at 20 characters or more, mixes lower case, upper case and digits as
// generated keys do (variable names are written in one case).
func Valid(name string) bool {
	return nameRE.MatchString(name) && !LooksLikeKey(name)
}

// LooksLikeKey reports whether name, though it may be a valid variable name, looks like a
// credential.
func LooksLikeKey(name string) bool {
	for _, p := range keyPrefixes {
		if strings.HasPrefix(name, p) && len(name) >= len(p)+12 {
			return true
		}
	}
	if len(name) < 20 {
		return false
	}
	var lower, upper, digit bool
	for _, r := range name {
		switch {
		case unicode.IsLower(r):
			lower = true
		case unicode.IsUpper(r):
			upper = true
		case unicode.IsDigit(r):
			digit = true
		}
	}
	return lower && upper && digit
}
