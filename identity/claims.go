package identity

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds of what a token may say of its principal.
const (
	maxPrincipalBytes = 256
	maxRoles          = 256
	maxRoleBytes      = 256
)

// claim is the value of claim name in claims: the top-level claim of that name if there is
// one (a namespaced claim such as https://example.com/roles has dots in its name), else the
// dotted path into nested objects (realm_access.roles).
func claim(claims map[string]any, name string) (any, bool) {
	if v, ok := claims[name]; ok {
		return v, true
	}
	var cur any = claims
	for part := range strings.SplitSeq(name, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// principalOf is the principal's id in claims, or what is wrong with it.
func principalOf(claims map[string]any, name string) (string, *Error) {
	v, ok := claim(claims, name)
	if !ok || v == nil {
		return "", refuse(CodePrincipal, fmt.Sprintf("the token has no %s claim, which names the principal (auth.oidc.principal_claim)", name))
	}
	var id string
	switch x := v.(type) {
	case string:
		id = x
	case json.Number:
		id = x.String()
	default:
		return "", refuse(CodePrincipal, fmt.Sprintf("the token's %s claim is not a string", name))
	}
	if msg := badName(id, maxPrincipalBytes); msg != "" {
		return "", refuse(CodePrincipal, fmt.Sprintf("the token's %s claim %s", name, msg))
	}
	return id, nil
}

// rolesOf is principal.roles from claims, read from claim name (none when name is "" or the
// token has no such claim), or what is wrong with them.
func rolesOf(claims map[string]any, name string) ([]string, *Error) {
	if name == "" {
		return nil, nil
	}
	v, ok := claim(claims, name)
	if !ok || v == nil {
		return nil, nil
	}
	var list []any
	switch x := v.(type) {
	case string:
		list = []any{x}
	case []any:
		list = x
	default:
		return nil, refuse(CodePrincipal, fmt.Sprintf("the token's %s claim (auth.oidc.roles_claim) is neither a string nor an array of strings", name))
	}
	if len(list) > maxRoles {
		return nil, refuse(CodePrincipal, fmt.Sprintf("the token's %s claim holds %d roles, more than the %d the gateway takes", name, len(list), maxRoles))
	}
	roles := make([]string, 0, len(list))
	seen := map[string]bool{}
	for _, item := range list {
		r, ok := item.(string)
		if !ok {
			return nil, refuse(CodePrincipal, fmt.Sprintf("the token's %s claim (auth.oidc.roles_claim) holds something other than a string", name))
		}
		if msg := badName(r, maxRoleBytes); msg != "" {
			return nil, refuse(CodePrincipal, fmt.Sprintf("a role in the token's %s claim %s", name, msg))
		}
		if !seen[r] {
			seen[r] = true
			roles = append(roles, r)
		}
	}
	return roles, nil
}

// scopesOf is the token's scopes: those of its scope claim (space-separated, RFC 9068 and
// RFC 8693) and of its scp claim (an array, or a space-separated string, as some providers
// write it).
func scopesOf(claims map[string]any) []string {
	var out []string
	for _, name := range []string{"scope", "scp"} {
		switch x := claims[name].(type) {
		case string:
			out = append(out, strings.Fields(x)...)
		case []any:
			for _, item := range x {
				if s, ok := item.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// badName says what is wrong with a principal or role of at most limit bytes, or "".
func badName(s string, limit int) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > limit:
		return fmt.Sprintf("is longer than %d bytes", limit)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.TrimSpace(s) != s:
		return "begins or ends with a space"
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "holds a control character"
		}
	}
	return ""
}
