package guards

import (
	"context"
	"net/netip"
	"strings"

	"go.yaml.in/yaml/v3"
)

// pii.regex finds personal data and redacts it by default; its findings mark the session
// private. Detectors, in priority order (an earlier one keeps a stretch a later one also
// matches):
//
//	EMAIL        local@domain.tld — [A-Za-z0-9._%+-]+@label(.label)*.tld, tld two letters or more
//	CREDIT_CARD  13 to 19 digits passing Luhn: one group, fours (4-4-4-4, 4-4-4-4-3, …) or
//	             4-6-5 / 4-6-4, joined throughout by single spaces or throughout by hyphens
//	SSN          AAA-GG-SSSS or AAA GG SSSS; not area 000, 666 or 900-999, group 00, serial 0000
//	IP_ADDRESS   dotted IPv4 (each part 0-255, no leading zeros, not part of a longer dotted
//	             number such as a version) and IPv6 with at least three groups
//	PHONE        +country and 8-15 digits in groups, or North American (NNN) NNN-NNNN,
//	             NNN-NNN-NNNN, NNN.NNN.NNNN, NNN NNN NNNN with an optional leading 1
//
// Numbers are read as runs of digit groups joined by single spaces, hyphens or dots, and an
// entity must be whole groups of such a run that no letter or digit touches, so the digits of a
// card are never also a phone number, and ten bare digits (a Unix timestamp) are not a phone.

// PIISettings are the settings of pii.regex.
type PIISettings struct {
	// Entities limits the detectors; empty means all.
	Entities []string `yaml:"entities" json:"entities,omitempty" jsonschema:"description=Which entities to find: EMAIL\\, CREDIT_CARD\\, SSN\\, PHONE\\, IP_ADDRESS (default all)."`
	// Replacement is the redaction text; {entity} is replaced by the entity's name.
	Replacement *string `yaml:"replacement" json:"replacement,omitempty" jsonschema:"description=Redaction text; {entity} becomes the entity name (default [{entity}])."`
}

// The pii.regex entities, in priority order.
const (
	entityEmail      = "EMAIL"
	entityCreditCard = "CREDIT_CARD"
	entitySSN        = "SSN"
	entityIP         = "IP_ADDRESS"
	entityPhone      = "PHONE"
)

var piiEntities = []string{entityEmail, entityCreditCard, entitySSN, entityIP, entityPhone}

type pii struct {
	email, card, ssn, ip, phone bool
	replacement                 map[string]string // entity → its redaction text
}

func newPII(node *yaml.Node) (Guard, error) {
	var s PIISettings
	if err := decodeSettings(node, &s); err != nil {
		return nil, err
	}
	var errs SettingErrors
	g := &pii{replacement: map[string]string{}}
	if len(s.Entities) == 0 {
		s.Entities = piiEntities
	}
	for i, name := range s.Entities {
		switch name {
		case entityEmail:
			g.email = true
		case entityCreditCard:
			g.card = true
		case entitySSN:
			g.ssn = true
		case entityIP:
			g.ip = true
		case entityPhone:
			g.phone = true
		default:
			errs.add(itemLine(node, "entities", i), "unknown entity %q%s", name, suggestion(name, piiEntities))
		}
	}
	tmpl := "[{entity}]"
	if s.Replacement != nil {
		tmpl = *s.Replacement
	}
	for _, name := range piiEntities {
		g.replacement[name] = strings.ReplaceAll(tmpl, "{entity}", name)
	}
	return g, errs.err()
}

func (g *pii) DefaultAction() Action { return ActionRedact }
func (g *pii) Stages() []Stage       { return allStages }

func (g *pii) Redact(text string, spans []Span) string {
	return Redact(text, spans, func(s Span) string { return g.replacement[s.Category] })
}

func (*pii) pollsContext() {}

func (g *pii) Scan(_ context.Context, text string) ([]Span, error) {
	var found []Span
	if g.email {
		found = findEmails(text)
	}
	if g.card || g.ssn || g.ip || g.phone {
		found = claim(found, g.findNumbers(text))
	}
	if g.ip {
		found = claim(found, findIPv6(text))
	}
	return found, nil
}

func piiSpan(start, end int, entity string) Span {
	return Span{Start: start, End: end, Category: entity, Label: LabelPrivate}
}

func isEmailLocal(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'
}

// findEmails finds local@domain.tld around every '@'.
func findEmails(text string) []Span {
	var out []Span
	prevEnd := 0
	for i := 0; i < len(text); {
		k := strings.IndexByte(text[i:], '@')
		if k < 0 {
			break
		}
		atSign := i + k
		i = atSign + 1
		start := atSign
		for start > prevEnd && isEmailLocal(text[start-1]) {
			start--
		}
		for start < atSign && text[start] == '.' {
			start++
		}
		if start == atSign {
			continue
		}
		end := domainEnd(text, atSign+1)
		if end < 0 {
			continue
		}
		out = append(out, piiSpan(start, end, entityEmail))
		prevEnd, i = end, end
	}
	return out
}

// domainEnd returns where the domain starting at i ends: the longest run of labels joined by
// single dots whose last label is two letters or more, with at least two labels; -1 if none.
func domainEnd(text string, i int) int {
	end, labels := -1, 0
	for j := i; ; {
		k := j
		for k < len(text) && (isAlnum(text[k]) || text[k] == '-') {
			k++
		}
		if k == j {
			return end
		}
		labels++
		if labels >= 2 && k-j >= 2 && allLetters(text[j:k]) {
			end = k
		}
		if k+1 < len(text) && text[k] == '.' && (isAlnum(text[k+1]) || text[k+1] == '-') {
			j = k + 1
			continue
		}
		return end
	}
}

func allLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isLetter(s[i]) {
			return false
		}
	}
	return true
}

// group is one run of digits in a number run.
type group struct {
	start, end int  // the digits
	joiner     byte // what joins it to the group before: ' ', '-', '.', ')' (after a parenthesis), 0 for the first
	paren      bool // written as (digits)
	plus       bool // preceded by '+'
	tainted    bool // touched by a letter, digit or '_' outside the run: never part of an entity
}

func (gr group) n() int { return gr.end - gr.start }

// findNumbers reads every run of digit groups and picks entities out of it, in priority order at
// each group: a card, an SSN, an IPv4 address, a phone number.
func (g *pii) findNumbers(text string) []Span {
	var out []Span
	var buf [24]group
	for i := 0; i < len(text); {
		// Find the next digit; a run may open with '+' or '('.
		for i < len(text) && !isDigit(text[i]) {
			i++
		}
		if i >= len(text) {
			break
		}
		groups, end := readRun(text, i, buf[:0])
		out = g.classify(text, groups, out)
		i = end
	}
	return out
}

// readRun reads the run of digit groups whose first digit is at i and returns its groups and
// the offset after it. Runs longer than the buffer are cut into pieces: no entity spans more
// than 24 groups.
func readRun(text string, i int, groups []group) ([]group, int) {
	first := group{start: i}
	switch before(text, i) {
	case '+':
		first.plus = true
		if isAlnum(before(text, i-1)) {
			first.tainted = true
		}
	case '(':
		if p := before(text, i-1); isAlnum(p) || p == '_' {
			first.tainted = true
		}
	default:
		if p := before(text, i); isAlnum(p) || p == '_' || p == '.' && isDigit(before(text, i-1)) {
			first.tainted = true
		}
	}
	cur := first
	for {
		j := cur.start
		for j < len(text) && isDigit(text[j]) {
			j++
		}
		cur.end = j
		if cur.start > 0 && text[cur.start-1] == '(' && at(text, j) == ')' {
			cur.paren = true
			j++
		}
		next := group{}
		switch c := at(text, j); {
		case cur.paren && isDigit(at(text, j)):
			next = group{start: j, joiner: ')'}
		case cur.paren && c == ' ' && isDigit(at(text, j+1)):
			next = group{start: j + 1, joiner: ')'}
		case (c == ' ' || c == '-' || c == '.') && isDigit(at(text, j+1)):
			next = group{start: j + 1, joiner: c}
		case (c == ' ' || c == '-') && at(text, j+1) == '(' && isDigit(at(text, j+2)):
			next = group{start: j + 2, joiner: c}
		default:
			if c := at(text, j); !cur.paren && (isAlnum(c) || c == '_') {
				cur.tainted = true
			}
			groups = append(groups, cur)
			return groups, j
		}
		groups = append(groups, cur)
		if len(groups) == cap(groups) {
			return groups, next.start
		}
		cur = next
	}
}

// classify appends the entities found among the groups of one run.
func (g *pii) classify(text string, gs []group, out []Span) []Span {
	for k := 0; k < len(gs); {
		if gs[k].tainted {
			k++
			continue
		}
		if g.card {
			if m := matchCard(text, gs, k); m > k {
				out = append(out, piiSpan(gs[k].start, gs[m-1].end, entityCreditCard))
				k = m
				continue
			}
		}
		if g.ssn {
			if m := matchSSN(text, gs, k); m > k {
				out = append(out, piiSpan(gs[k].start, gs[m-1].end, entitySSN))
				k = m
				continue
			}
		}
		if g.ip {
			if m := matchIPv4(text, gs, k); m > k {
				out = append(out, piiSpan(gs[k].start, gs[m-1].end, entityIP))
				k = m
				continue
			}
		}
		if g.phone {
			if start, m := matchPhone(text, gs, k); m > k {
				out = append(out, piiSpan(start, gs[m-1].end, entityPhone))
				k = m
				continue
			}
		}
		k++
	}
	return out
}

// clean reports whether groups k..m-1 can form an entity: none tainted, every joiner between
// them one of joiners, and, when plain, no parentheses or plus sign.
func clean(gs []group, k, m int, joiners string, plain bool) bool {
	for i := k; i < m; i++ {
		if gs[i].tainted || plain && (gs[i].paren || gs[i].plus) {
			return false
		}
		if i > k && strings.IndexByte(joiners, gs[i].joiner) < 0 {
			return false
		}
	}
	return true
}

// matchCard returns the end of a card number starting at group k, or k. A card is 13 to 19
// digits passing Luhn, written as one group, as groups of four with a shorter last group
// (4-4-4-4, 4-4-4-4-3, 4-4-4-1…), or as 4-6-5 / 4-6-4 (American Express, Diners), with one kind
// of joiner, space or hyphen. The longest form wins.
func matchCard(text string, gs []group, k int) int {
	if gs[k].paren || gs[k].plus {
		return k
	}
	if n := gs[k].n(); n >= 13 && n <= 19 {
		if luhn(text, gs[k:k+1]) {
			return k + 1
		}
		return k
	}
	if gs[k].n() != 4 || k+1 >= len(gs) {
		return k
	}
	joiner := gs[k+1].joiner
	if joiner != ' ' && joiner != '-' {
		return k
	}
	last, digits := k+1, 4
	for m := k + 1; m < len(gs) && gs[m].joiner == joiner && !gs[m].tainted && !gs[m].paren && digits+gs[m].n() <= 19; m++ {
		digits += gs[m].n()
		last = m + 1
	}
	for m := last; m > k+1; m-- {
		if cardShape(gs[k:m]) && luhn(text, gs[k:m]) {
			return m
		}
	}
	return k
}

// cardShape reports whether groups (the first of four digits) have a card's shape: 13 to 19
// digits as fours with a last group of one to four, or 4-6-5 / 4-6-4.
func cardShape(gs []group) bool {
	total := 0
	for _, g := range gs {
		total += g.n()
	}
	if total < 13 || total > 19 {
		return false
	}
	if len(gs) == 3 && gs[1].n() == 6 && (gs[2].n() == 5 || gs[2].n() == 4) {
		return true
	}
	for _, g := range gs[:len(gs)-1] {
		if g.n() != 4 {
			return false
		}
	}
	return gs[len(gs)-1].n() <= 4
}

// luhn checks the Luhn checksum of the digits of gs.
func luhn(text string, gs []group) bool {
	sum, double := 0, false
	for i := len(gs) - 1; i >= 0; i-- {
		for j := gs[i].end - 1; j >= gs[i].start; j-- {
			d := int(text[j] - '0')
			if double {
				if d *= 2; d > 9 {
					d -= 9
				}
			}
			sum += d
			double = !double
		}
	}
	return sum%10 == 0
}

// matchSSN matches AAA-GG-SSSS (or with spaces) at group k with the invalid ranges excluded.
func matchSSN(text string, gs []group, k int) int {
	if k+3 > len(gs) || gs[k].n() != 3 || gs[k+1].n() != 2 || gs[k+2].n() != 4 {
		return k
	}
	j := gs[k+1].joiner
	if j != '-' && j != ' ' || gs[k+2].joiner != j || !clean(gs, k, k+3, "- ", true) {
		return k
	}
	area, grp, serial := text[gs[k].start:gs[k].end], text[gs[k+1].start:gs[k+1].end], text[gs[k+2].start:gs[k+2].end]
	if area == "000" || area == "666" || area[0] == '9' || grp == "00" || serial == "0000" {
		return k
	}
	return k + 3
}

// matchIPv4 matches four dotted groups of 0-255 at group k that are the whole dotted stretch.
func matchIPv4(text string, gs []group, k int) int {
	if k+4 > len(gs) || k > 0 && gs[k].joiner == '.' || k+4 < len(gs) && gs[k+4].joiner == '.' {
		return k
	}
	if !clean(gs, k, k+4, ".", true) {
		return k
	}
	for _, gr := range gs[k : k+4] {
		part := text[gr.start:gr.end]
		if len(part) > 3 || len(part) > 1 && part[0] == '0' || len(part) == 3 && part > "255" {
			return k
		}
	}
	return k + 4
}

// matchPhone matches a phone number at group k and returns where it starts (a '+' or '('
// included) and the group after it.
func matchPhone(text string, gs []group, k int) (int, int) {
	start := gs[k].start
	if gs[k].plus {
		// International: + then 8 to 15 digits in groups.
		digits, m := 0, k
		for ; m < len(gs) && !gs[m].tainted; m++ {
			if digits+gs[m].n() > 15 {
				break
			}
			digits += gs[m].n()
		}
		if digits >= 8 && text[gs[k].start] != '0' {
			return start - 1, m
		}
		return start, k
	}
	if gs[k].paren {
		start--
	}
	// North American: [1 ]AAA EEE NNNN with separators (or a parenthesised area code).
	i := k
	if gs[i].n() == 1 && text[gs[i].start] == '1' && !gs[i].paren && i+1 < len(gs) {
		i++
	}
	if i+3 > len(gs) || gs[i].n() != 3 || gs[i+1].n() != 3 || gs[i+2].n() != 4 {
		return start, k
	}
	if !clean(gs, k, i+3, " -.)", false) || gs[i+1].paren || gs[i+2].paren || gs[i].plus {
		return start, k
	}
	if gs[i+1].joiner == ')' && !gs[i].paren {
		return start, k
	}
	return start, i + 3
}

// findIPv6 finds IPv6 addresses: runs of hex digits, colons and dots around a colon that parse
// as IPv6 and have at least three groups, so "std::min" and times are not addresses.
func findIPv6(text string) []Span {
	var out []Span
	for i := 0; i < len(text); {
		k := strings.IndexByte(text[i:], ':')
		if k < 0 {
			break
		}
		c := i + k
		start, end := c, c
		for start > 0 && (isHex(text[start-1]) || text[start-1] == ':' || text[start-1] == '.') {
			start--
		}
		for end < len(text) && (isHex(text[end]) || text[end] == ':' || text[end] == '.') {
			end++
		}
		i = end
		if p := before(text, start); isAlnum(p) || p == '_' {
			continue
		}
		if n := at(text, end); isAlnum(n) || n == '_' {
			continue
		}
		for end > start && text[end-1] == '.' {
			end--
		}
		if end-start >= 2 && text[end-1] == ':' && text[end-2] != ':' {
			end--
		}
		cand := text[start:end]
		if strings.Count(cand, ":") < 2 || hexGroups(cand) < 3 {
			continue
		}
		if a, err := netip.ParseAddr(cand); err == nil && a.Is6() {
			out = append(out, piiSpan(start, end, entityIP))
		}
	}
	return out
}

// hexGroups counts the non-empty colon-separated groups of s.
func hexGroups(s string) int {
	n := 0
	for part := range strings.SplitSeq(s, ":") {
		if part != "" {
			n++
		}
	}
	return n
}
