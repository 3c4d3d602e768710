package guards

import "testing"

func TestPII(t *testing.T) {
	g := newGuard(t, "pii.regex", "")
	tests := []struct {
		name string
		text string
		want []found
	}{
		{"email", "write to ann.lee+robots@example.co.uk today", []found{f("EMAIL", "ann.lee+robots@example.co.uk")}},
		{"email needs a tld", "user@localhost and a@b.c", nil},
		{"email drops a trailing digit label", "ann@host.example.com.5 x", []found{f("EMAIL", "ann@host.example.com")}},
		{"card with spaces", "card 4111 1111 1111 1111 exp 12/29", []found{f("CREDIT_CARD", "4111 1111 1111 1111")}},
		{"card with hyphens", "4111-1111-1111-1111", []found{f("CREDIT_CARD", "4111-1111-1111-1111")}},
		{"card in one group", "pan=4111111111111111;", []found{f("CREDIT_CARD", "4111111111111111")}},
		{"amex 4-6-5", "amex 3782 822463 10005", []found{f("CREDIT_CARD", "3782 822463 10005")}},
		{"card failing Luhn is nothing", "4111 1111 1111 1112", nil},
		{"card failing Luhn in one group is nothing", "4111111111111112", nil},
		{"card with mixed joiners is not a card", "4111 1111-1111 1111", nil},
		{"no phone inside a card", "5555 5555 5555 4444", []found{f("CREDIT_CARD", "5555 5555 5555 4444")}},
		{"no phone inside a card with hyphens", "5105-1051-0510-5100", []found{f("CREDIT_CARD", "5105-1051-0510-5100")}},
		{"card then phone", "4111111111111111 555-123-4567", []found{f("CREDIT_CARD", "4111111111111111"), f("PHONE", "555-123-4567")}},
		{"card inside a longer number is nothing", "41111111111111110000000", nil},
		{"ssn", "ssn 536-22-1234.", []found{f("SSN", "536-22-1234")}},
		{"ssn with spaces", "536 22 1234", []found{f("SSN", "536 22 1234")}},
		{"ssn area 000", "000-12-3456", nil},
		{"ssn area 666", "666-12-3456", nil},
		{"ssn area 9xx", "912-12-3456", nil},
		{"ssn group 00", "536-00-1234", nil},
		{"ssn serial 0000", "536-22-0000", nil},
		{"ssn mixed joiners", "536-22 1234", nil},
		{"ipv4", "robot at 192.168.1.20, gateway 10.0.0.1.", []found{f("IP_ADDRESS", "192.168.1.20"), f("IP_ADDRESS", "10.0.0.1")}},
		{"version is not an ip", "firmware v1.2.3.4 and 1.2.3.4.5", nil},
		{"ip part over 255", "256.1.1.1", nil},
		{"ip with leading zero", "01.2.3.4", nil},
		{"ipv6", "addr 2001:db8::8a2e:370:7334 up", []found{f("IP_ADDRESS", "2001:db8::8a2e:370:7334")}},
		{"no ipv6 in code or times", "std::vector at 12:30:45, a::b", nil},
		{"phone nanp", "call (555) 123-4567 or 555.987.6543", []found{f("PHONE", "(555) 123-4567"), f("PHONE", "555.987.6543")}},
		{"phone with country 1", "1-800-555-0199", []found{f("PHONE", "1-800-555-0199")}},
		{"phone international", "ring +44 20 7946 0958 now", []found{f("PHONE", "+44 20 7946 0958")}},
		{"phone +1 with parens", "+1 (555) 123-4567", []found{f("PHONE", "+1 (555) 123-4567")}},
		{"timestamp is not a phone", "t=1712345678 ms", nil},
		{"digits glued to letters are nothing", "id a555-123-4567 and 555-123-4567b", nil},
		{"date is nothing", "2024-01-15 12:30", nil},
		{"phone digits inside an email are the email", "555-123-4567@example.com", []found{f("EMAIL", "555-123-4567@example.com")}},
		{"a short number near a phone", "aisle 2 555-123-4567", []found{f("PHONE", "555-123-4567")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := spansOf(t, g, tt.text); !equalFound(got, tt.want) {
				t.Errorf("Scan(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestPIIEntitiesAndLabel(t *testing.T) {
	g := newGuard(t, "pii.regex", "entities: [EMAIL]")
	got := spansOf(t, g, "ann@example.com 4111 1111 1111 1111 555-123-4567")
	if want := []found{f("EMAIL", "ann@example.com")}; !equalFound(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	spans, _ := g.Scan(t.Context(), "ann@example.com")
	if spans[0].Label != LabelPrivate {
		t.Errorf("label %q, want %q", spans[0].Label, LabelPrivate)
	}
}

func TestPIIRedaction(t *testing.T) {
	tests := []struct {
		settings, text, want string
	}{
		{"", "mail ann@example.com, card 4111 1111 1111 1111", "mail [EMAIL], card [CREDIT_CARD]"},
		{"replacement: '<{entity} removed>'", "ssn 536-22-1234", "ssn <SSN removed>"},
		{"replacement: '***'", "ip 10.1.2.3 and +44 20 7946 0958", "ip *** and ***"},
	}
	for _, tt := range tests {
		g := newGuard(t, "pii.regex", tt.settings).(*pii)
		spans, _ := g.Scan(t.Context(), tt.text)
		if got := g.Redact(tt.text, spans); got != tt.want {
			t.Errorf("%s: Redact(%q) = %q, want %q", tt.settings, tt.text, got, tt.want)
		}
	}
}
