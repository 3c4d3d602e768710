package guards

import (
	"strings"
	"testing"
)

// Fake credentials in the shapes the detectors look for.
var (
	awsKey       = "AKIAIOSFODNN7EXAMPLE"
	awsTempKey   = "ASIAY34FZKBOKMUTVV7A"
	githubToken  = "ghp_" + strings.Repeat("aB3dE6gH9j", 3) + "K2mN5p"
	githubPAT    = "github_pat_11ABCDEFG0123456789_abcdefghijKLMNOPQRST"
	slackToken   = "xoxb-1234567890-abcdefGHIJ"
	anthropicKey = "sk-ant-api03-" + strings.Repeat("Ab1_", 10)
	openaiKey    = "sk-proj-" + strings.Repeat("Xy9-", 8)
	openaiLegacy = "sk-" + strings.Repeat("abc123XYZ", 5)
	googleKey    = "AIza" + strings.Repeat("Sy_0-", 7)
	jwt          = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl"
	pemKey       = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn\n/ygWyF8PbnGy0AHB7MaKk=\n-----END RSA PRIVATE KEY-----"
)

func TestSecrets(t *testing.T) {
	g := newGuard(t, "secrets.scan", "")
	tests := []struct {
		name string
		text string
		want []found
	}{
		{"pem", "key:\n" + pemKey + "\nend", []found{f("private_key", pemKey)}},
		{"pem cut short", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n", []found{f("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA")}},
		{"public key is not a secret", "-----BEGIN PUBLIC KEY-----\nMIIBIjANBg\n-----END PUBLIC KEY-----", nil},
		{"aws", "id=" + awsKey + " region", []found{f("aws_access_key", awsKey)}},
		{"aws temporary", awsTempKey, []found{f("aws_access_key", awsTempKey)}},
		{"aws too long", awsKey + "X", nil},
		{"aws glued", "X" + awsKey, nil},
		{"github classic", "token " + githubToken, []found{f("github_token", githubToken)}},
		{"github fine-grained", githubPAT, []found{f("github_token", githubPAT)}},
		{"github too short", "ghp_abc123", nil},
		{"slack", "SLACK=" + slackToken, []found{f("slack_token", slackToken)}},
		{"anthropic, not also openai", "key " + anthropicKey, []found{f("anthropic_key", anthropicKey)}},
		{"openai project", openaiKey, []found{f("openai_key", openaiKey)}},
		{"openai legacy", openaiLegacy, []found{f("openai_key", openaiLegacy)}},
		{"kebab-case words are not a key", "sk-learn-compatible-estimator-pipeline", nil},
		{"risk- is not sk-", "risk-0123456789abcdefghij", nil},
		{"google", "maps " + googleKey + ".", []found{f("google_api_key", googleKey)}},
		{"google wrong length", googleKey[:38], nil},
		{"jwt", "Authorization: Bearer " + jwt, []found{f("jwt", jwt)}},
		{"credential assignment", "db password=hunter22 ok", []found{f("credential_assignment", "hunter22")}},
		{"credential yaml", "client_secret: s3cr3t-value\n", []found{f("credential_assignment", "s3cr3t-value")}},
		{"credential json", `{"api_key": "abcd1234"}`, []found{f("credential_assignment", "abcd1234")}},
		{"credential quoted with spaces", `API_KEY = "open sesame"`, []found{f("credential_assignment", "open sesame")}},
		{"credential go :=", `password := "hunter22"`, []found{f("credential_assignment", "hunter22")}},
		{"credential in a query", "?user=ann&passwd=pa55word&x=1", []found{f("credential_assignment", "pa55word")}},
		{"bearer scheme is skipped", "Authorization: Bearer abcdefgh1234", []found{f("credential_assignment", "abcdefgh1234")}},
		{"placeholders are not credentials", "password=${DB_PASS} secret: <value> token=[SECRET] pwd2=**** password=null password=$DB_PASSWORD", nil},
		{"short values are not credentials", "password=abc", nil},
		{"comparison is not assignment", "if password == other", nil},
		{"known kind wins over assignment", "aws_secret_key=" + awsKey, []found{f("aws_access_key", awsKey)}},
		{"anthropic key as an assignment value", "ANTHROPIC_API_KEY=" + anthropicKey, []found{f("anthropic_key", anthropicKey)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := spansOf(t, g, tt.text); !equalFound(got, tt.want) {
				t.Errorf("Scan(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestSecretsKinds(t *testing.T) {
	// Without anthropic_key, an Anthropic key still does not count as an OpenAI key.
	g := newGuard(t, "secrets.scan", "kinds: [openai_key, jwt]")
	got := spansOf(t, g, anthropicKey+" "+awsKey+" "+openaiKey)
	if want := []found{f("openai_key", openaiKey)}; !equalFound(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSecretsRedaction(t *testing.T) {
	for _, tt := range []struct{ settings, text, want string }{
		{"", "key " + awsKey + " and password=hunter22", "key [SECRET] and password=[SECRET]"},
		{"replacement: '<removed>'", `{"t": "` + jwt + `"}`, `{"t": "<removed>"}`},
	} {
		g := newGuard(t, "secrets.scan", tt.settings).(*secrets)
		spans, _ := g.Scan(t.Context(), tt.text)
		if got := g.Redact(tt.text, spans); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}
