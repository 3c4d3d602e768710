package envname

import "testing"

func TestValid(t *testing.T) {
	for name, want := range map[string]bool{
		"ANTHROPIC_API_KEY":                     true,
		"OPENAI_API_KEY":                        true,
		"my_gateway_key":                        true,
		"team_token_2026":                       true,
		"LITELLM_MASTER_KEY_PROD_2026":          true,
		"_X":                                    true,
		"":                                      false,
		"1BAD":                                  false,
		"sk-proj-PLANTEDLITERAL0123456789":      false,
		"gsk_PLANTEDLITERAL0123456789abcdefXYZ": false,
		"hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345":   false,
		"AKIAIOSFODNN7EXAMPLE":                  false,
		"ghp_1234567890abcdefghijABCDEFGHIJ12":  false,
		"xK9mQ2vL7pR4tW8zB3nY6cH1":              false, // generated: mixed case and digits
		"sk_":                                   true,  // too short to be a key
	} {
		if got := Valid(name); got != want {
			t.Errorf("Valid(%q) = %v, want %v", name, got, want)
		}
	}
}
