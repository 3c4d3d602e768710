// Package suggest finds the name a misspelled one most likely meant, for "did you mean"
// messages in the config loader and the guards' settings.
package suggest

import "strings"

// Closest returns the candidate a misspelled name most likely meant, or "" when none is close.
// Case, "-", "_" and "." are ignored first (callTimeoutSec, call-timeout-sec), then one edit
// plus one more per four characters of the name is allowed.
func Closest(name string, candidates []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "", ".", "").Replace(strings.ToLower(s))
	}
	lower := strings.ToLower(name)
	best, bestDist := "", 2+len(name)/4
	for _, c := range candidates {
		if norm(c) == norm(name) {
			return c
		}
		if d := editDistance(lower, strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, counted in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
