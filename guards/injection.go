package guards

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// injection.heuristic scores text for phrases typical of prompt injection and blocks by default
// when the score reaches the threshold; its findings mark the session untrusted. It reads
// English words, ignoring case, and is cheap and easy to evade: pair it with untrusted labels,
// policies and approvals rather than trusting it alone.
//
// Each category scores the weight of its strongest phrase in the text, and the text's score
// combines the categories as independent evidence: 1 − ∏(1 − weight). With the default
// threshold 0.5 one strong phrase is enough ("ignore all previous instructions", 0.9), while a
// weak one ("act as a …", 0.3) needs company. The categories:
//
//	instruction_override  ignore/disregard/forget … previous/prior/above … instructions/rules,
//	                      do not follow your instructions, forget everything above
//	system_prompt_reveal  reveal/print/repeat … system prompt, … your hidden instructions
//	role_override         you are now DAN / a …, from now on you …, act as …, pretend to be …,
//	                      jailbreak, developer mode
//	fake_system_message   <system>, <|im_start|>, [INST], <<SYS>>, "### system:" and a line
//	                      opening with "system:" or "assistant:"
//	exfiltration          send/post/upload/forward … to/into … http(s)://…
//	hidden_text           text a person cannot see but a model reads: Unicode tag characters
//	                      (U+E0000–E007F, 0.9; a flag emoji's short tag sequence excepted) and
//	                      bidirectional overrides and embeddings (U+202A–202E, 0.6), which show
//	                      text in another order than it is read
//
// Findings are the phrases, each with its category, reported only when the score reaches the
// threshold. Redaction replaces the whole text: an injection is not safely cut out word by word.

// InjectionSettings are the settings of injection.heuristic.
type InjectionSettings struct {
	// Threshold is the score, in (0, 1], at which the text is flagged.
	Threshold *float64 `yaml:"threshold" json:"threshold,omitempty" jsonschema:"exclusiveMinimum=0,maximum=1,description=Score in (0\\, 1] at which text is flagged (default 0.5)."`
}

// The injection categories, in the order their scores are kept.
const (
	catOverride = iota
	catReveal
	catRole
	catFakeSystem
	catExfiltration
	catHidden
	numInjectionCategories
)

var injectionCategories = [numInjectionCategories]string{
	"instruction_override", "system_prompt_reveal", "role_override", "fake_system_message", "exfiltration", "hidden_text",
}

// injectionPhrases are word patterns: slots of alternative words separated by spaces, "[..N]"
// allowing up to N other words before the next slot, "?" marking an optional slot, and <url>
// matching http:// or https:// and the rest of the address. Within a category, stronger
// phrases come first.
var injectionPhrases = []struct {
	category int
	weight   float64
	pattern  string
}{
	{catOverride, 0.9, "ignore|disregard|forget|skip|override|bypass|drop|discard [..3] previous|prior|above|earlier|preceding|foregoing|original|initial|former|old|system|developer|safety [..2] instructions|instruction|prompts|prompt|rules|directions|directives|guidelines|commands|constraints|guardrails|context|messages|orders"},
	{catOverride, 0.8, "not follow|obey [..2] previous|prior|above|original|system|your|any [..1] instructions|rules|guidelines|prompt|directives"},
	{catOverride, 0.7, "ignore|disregard|forget|bypass|override your|all|any|these|those instructions|prompts|prompt|rules|directives|guidelines|constraints|guardrails|programming|training"},
	{catOverride, 0.7, "ignore|disregard|forget everything|anything [..3] above|before|earlier|previously|said|told|prior"},
	{catOverride, 0.4, "new|updated|revised|real|actual instructions|directives|orders"},
	{catReveal, 0.7, "reveal|show|print|repeat|output|display|leak|dump|disclose|tell|give|recite|write|share|what [..4] system|initial|original|hidden|secret|developer|your|full prompt|prompts"},
	{catReveal, 0.6, "reveal|print|repeat|output|leak|dump|disclose|recite|show|display [..3] your|initial|original|hidden|secret|system instructions|directives|guidelines|configuration"},
	{catReveal, 0.5, "repeat|print|output|recite [..3] words|text|everything|content above|before|verbatim"},
	{catRole, 0.5, "you are now dan|jailbroken|unrestricted|unfiltered|uncensored|evil"},
	{catRole, 0.5, "jailbreak|jailbroken|jailbreaking"},
	{catRole, 0.45, "you are now a|an|the|my|in|no|free"},
	{catRole, 0.45, "from now on you|your|act|pretend|respond|answer|behave|ignore"},
	{catRole, 0.4, "developer|dan|god|jailbreak|unrestricted mode"},
	{catRole, 0.4, "pretend|roleplay [..2] be|are|re"},
	{catRole, 0.3, "act|behave as [..1] a|an|if|though|my|dan"},
	{catExfiltration, 0.6, "send|post|upload|forward|transmit|exfiltrate|leak|email|submit|copy|share|append|include [..8] to|into|at|via|on [..3] <url>"},
}

// injectionMarkers are fake message delimiters, matched ignoring case where they appear.
var injectionMarkers = []string{
	"<system>", "</system>", "<|system|>", "<|im_start|>", "<|im_end|>", "<<sys>>", "<</sys>>",
	"[inst]", "[/inst]", "[system]", "<system_prompt>", "<|endoftext|>",
}

const (
	markerWeight     = 0.6  // a delimiter of a chat template
	hashHeaderWeight = 0.6  // "### system:"
	lineRoleWeight   = 0.35 // a line opening with "system:" or "assistant:"
	maxLookahead     = 16   // words a phrase may span after its first
)

type slot struct {
	words    []string
	url      bool
	gap      int
	optional bool
}

type injPhrase struct {
	category int
	weight   float64
	slots    []slot // after the first
}

type injection struct {
	threshold float64
	triggers  map[string][]injPhrase // first word → phrases, stronger first
	lenMask   [256]uint32            // lenMask[first byte] has bit n if a trigger of length n starts with it
}

// compiledInjection is built once from the tables above; it is read-only.
var compiledInjection = compileInjection()

func compileInjection() *injection {
	g := &injection{triggers: map[string][]injPhrase{}}
	for _, p := range injectionPhrases {
		slots, err := parsePhrase(p.pattern)
		if err != nil {
			panic(err) // the table above is wrong
		}
		ph := injPhrase{category: p.category, weight: p.weight, slots: slots[1:]}
		for _, w := range slots[0].words {
			g.triggers[w] = append(g.triggers[w], ph)
			g.addTrigger(w)
		}
	}
	for _, w := range []string{"system", "assistant"} {
		g.addTrigger(w)
	}
	return g
}

func (g *injection) addTrigger(w string) {
	if len(w) < 32 {
		g.lenMask[w[0]] |= 1 << len(w)
	}
}

func parsePhrase(pattern string) ([]slot, error) {
	var slots []slot
	gap := 0
	for f := range strings.FieldsSeq(pattern) {
		if strings.HasPrefix(f, "[..") && strings.HasSuffix(f, "]") {
			n, err := strconv.Atoi(f[3 : len(f)-1])
			if err != nil {
				return nil, fmt.Errorf("injection phrase %q: bad gap %q", pattern, f)
			}
			gap = n
			continue
		}
		s := slot{gap: gap}
		gap = 0
		if strings.HasSuffix(f, "?") {
			s.optional, f = true, strings.TrimSuffix(f, "?")
		}
		if f == "<url>" {
			s.url = true
		} else {
			s.words = strings.Split(f, "|")
		}
		slots = append(slots, s)
	}
	if len(slots) == 0 || slots[0].url || slots[0].optional || slots[0].gap > 0 {
		return nil, fmt.Errorf("injection phrase %q must start with words", pattern)
	}
	return slots, nil
}

func newInjection(node *yaml.Node) (Guard, error) {
	var s InjectionSettings
	if err := decodeSettings(node, &s); err != nil {
		return nil, err
	}
	g := *compiledInjection
	g.threshold = 0.5
	if s.Threshold != nil {
		if t := *s.Threshold; !(t > 0 && t <= 1) {
			return nil, SettingErrors{{Line: lineOf(node, "threshold"), Msg: fmt.Sprintf("threshold must be above 0 and at most 1, not %v", t)}}
		}
		g.threshold = *s.Threshold
	}
	return &g, nil
}

func (g *injection) DefaultAction() Action { return ActionBlock }

// Stages: content that reaches a model from outside (results, tool descriptions, the task) and
// arguments that could carry an injection on to another agent; not the final answer.
func (g *injection) Stages() []Stage { return stagesExcept(StageOutput) }

func (g *injection) Redact(text string, spans []Span) string {
	if len(spans) == 0 {
		return text
	}
	return defaultReplacement
}

func isInjWord(c byte) bool { return isAlnum(c) || c == '_' || c >= 0x80 }

func (*injection) pollsContext() {}

func (g *injection) Scan(_ context.Context, text string) ([]Span, error) {
	var found []Span
	var best [numInjectionCategories]float64
	hit := func(cat int, weight float64, start, end int) {
		best[cat] = max(best[cat], weight)
		if len(found) == 0 || found[len(found)-1].End <= start {
			found = append(found, Span{Start: start, End: end, Category: injectionCategories[cat], Label: LabelUntrusted})
		}
	}
	for i := 0; i < len(text); {
		c := text[i]
		if !isInjWord(c) {
			if c == '<' || c == '[' || c == '#' {
				if end, w := markerAt(text, i); end > i {
					hit(catFakeSystem, w, i, end)
					i = end
					continue
				}
			}
			i++
			continue
		}
		j := i + 1
		for j < len(text) && isInjWord(text[j]) {
			j++
		}
		if n := j - i; n < 32 && g.lenMask[lower(c)]&(1<<n) != 0 {
			if end, cat, w := g.phraseAt(text, i, j); end > 0 {
				hit(cat, w, i, end)
				i = end
				continue
			}
		}
		i = j
	}
	if hidden := hiddenText(text); len(hidden) > 0 {
		for _, h := range hidden {
			best[catHidden] = max(best[catHidden], h.weight)
		}
		found = mergeSpans(found, hidden)
	}
	if len(found) == 0 {
		return nil, nil
	}
	// The chance that no category is evidence of an injection; the score is its complement.
	none := 1.0
	for _, w := range best {
		none *= 1 - w
	}
	if score := 1 - none; score < g.threshold-1e-9 {
		return nil, nil
	}
	return found, nil
}

// phraseAt tries the phrases whose first word is text[i:j] and returns the end, category and
// weight of the first that matches.
func (g *injection) phraseAt(text string, i, j int) (int, int, float64) {
	var buf [32]byte
	word := buf[:j-i]
	for k := range word {
		word[k] = lower(text[i+k])
	}
	if string(word) == "system" || string(word) == "assistant" {
		if end := lineRoleAt(text, i, j); end > 0 {
			return end, catFakeSystem, lineRoleWeight
		}
	}
	phrases := g.triggers[string(word)]
	if len(phrases) == 0 {
		return 0, 0, 0
	}
	cur := wordCursor{text: text, next: j}
	for _, p := range phrases {
		if end, ok := cur.match(p.slots, 0, j); ok {
			return end, p.category, p.weight
		}
	}
	return 0, 0, 0
}

// lineRoleAt matches "system:" or "assistant:" opening a line (the word is text[i:j]).
func lineRoleAt(text string, i, j int) int {
	k := i
	for k > 0 && (text[k-1] == ' ' || text[k-1] == '\t') {
		k--
	}
	if k > 0 && text[k-1] != '\n' {
		return 0
	}
	if at(text, j) == ':' {
		return j + 1
	}
	return 0
}

// markerAt matches a chat-template delimiter or a "### system:" header at text[i].
func markerAt(text string, i int) (int, float64) {
	if text[i] == '#' {
		k := i
		for k > 0 && (text[k-1] == ' ' || text[k-1] == '\t') {
			k--
		}
		if k > 0 && text[k-1] != '\n' || i > 0 && text[i-1] == '#' {
			return 0, 0
		}
		j := i
		for j < len(text) && text[j] == '#' {
			j++
		}
		for j < len(text) && text[j] == ' ' {
			j++
		}
		for _, w := range []string{"system", "instructions", "instruction"} {
			if hasPrefixFold(text, j, w) && !isInjWord(at(text, j+len(w))) {
				e := j + len(w)
				for e < len(text) && text[e] == ' ' {
					e++
				}
				if c := at(text, e); c == ':' {
					return e + 1, hashHeaderWeight
				} else if c == '\n' || c == 0 {
					return e, hashHeaderWeight
				}
			}
		}
		return 0, 0
	}
	for _, m := range injectionMarkers {
		if m[0] == text[i] && hasPrefixFold(text, i, m) {
			return i + len(m), markerWeight
		}
	}
	return 0, 0
}

// wordCursor finds the words after a phrase's first word, lazily and at most maxLookahead.
type wordCursor struct {
	text  string
	next  int // where to look for the next word
	n     int
	words [maxLookahead][2]int
}

// word returns the k-th word after the first.
func (c *wordCursor) word(k int) (int, int, bool) {
	for c.n <= k && c.n < maxLookahead {
		i := c.next
		for i < len(c.text) && !isInjWord(c.text[i]) {
			i++
		}
		if i >= len(c.text) {
			return 0, 0, false
		}
		j := i + 1
		for j < len(c.text) && isInjWord(c.text[j]) {
			j++
		}
		c.words[c.n] = [2]int{i, j}
		c.n++
		c.next = j
	}
	if k >= c.n {
		return 0, 0, false
	}
	return c.words[k][0], c.words[k][1], true
}

// match matches slots against the words from the w-th on; end is where the last matched word
// ends. It backtracks over the gaps, which are short.
func (c *wordCursor) match(slots []slot, w, end int) (int, bool) {
	if len(slots) == 0 {
		return end, true
	}
	s := slots[0]
	for skip := 0; skip <= s.gap; skip++ {
		i, j, ok := c.word(w + skip)
		if !ok {
			break
		}
		if e := s.matchWord(c.text, i, j); e > 0 {
			if e2, ok := c.match(slots[1:], w+skip+1, e); ok {
				return e2, true
			}
		}
	}
	if s.optional {
		return c.match(slots[1:], w, end)
	}
	return 0, false
}

// matchWord returns the end of the match of slot s at the word text[i:j], or 0.
func (s *slot) matchWord(text string, i, j int) int {
	if s.url {
		if (j-i == 4 && hasPrefixFold(text, i, "http") || j-i == 5 && hasPrefixFold(text, i, "https")) && strings.HasPrefix(text[j:], "://") {
			e := j + 3
			for e < len(text) && text[e] > ' ' && text[e] != '"' && text[e] != '\'' && text[e] != '>' && text[e] != ')' {
				e++
			}
			return e
		}
		return 0
	}
	for _, w := range s.words {
		if len(w) == j-i && hasPrefixFold(text, i, w) {
			return j
		}
	}
	return 0
}

type hiddenSpan struct {
	start, end int
	weight     float64
}

// flagTags is the most tag characters a subdivision flag emoji carries after its black flag
// (U+1F3F4): up to six letters and the cancel tag (🏴 g b e n g ␡ is England's).
const flagTags = 7

// hiddenText finds the hidden_text spans of text: runs of tag characters (but the tag sequence
// of a flag emoji) and bidirectional overrides and embeddings. Text without their lead bytes is
// not decoded.
func hiddenText(text string) []hiddenSpan {
	if !strings.Contains(text, "\xf3\xa0") && !strings.Contains(text, "\xe2\x80") {
		return nil
	}
	var out []hiddenSpan
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r >= 0xE0000 && r <= 0xE007F:
			start, n := i, 0
			for i < len(text) {
				r, size := utf8.DecodeRuneInString(text[i:])
				if r < 0xE0000 || r > 0xE007F {
					break
				}
				i += size
				n++
			}
			flag := n <= flagTags && strings.HasSuffix(text[:start], "\U0001F3F4") && strings.HasSuffix(text[:i], "\U000E007F")
			if !flag {
				out = append(out, hiddenSpan{start, i, 0.9})
			}
			continue
		case r >= 0x202A && r <= 0x202E:
			out = append(out, hiddenSpan{i, i + size, 0.6})
		}
		i += size
	}
	return out
}

// mergeSpans adds the hidden_text spans to found (both in order), keeping the order and leaving
// out a span that overlaps one before it.
func mergeSpans(found []Span, hidden []hiddenSpan) []Span {
	all := make([]Span, 0, len(found)+len(hidden))
	all = append(all, found...)
	for _, h := range hidden {
		all = append(all, Span{Start: h.start, End: h.end, Category: injectionCategories[catHidden], Label: LabelUntrusted})
	}
	slices.SortStableFunc(all, func(a, b Span) int { return a.Start - b.Start })
	out := all[:0]
	for _, sp := range all {
		if len(out) == 0 || out[len(out)-1].End <= sp.Start {
			out = append(out, sp)
		}
	}
	return out
}
