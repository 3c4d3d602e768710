package console

import "strings"

// DiffLine is one line of a line diff: Op is ' ' (in both), '-' (only in the old text) or '+'
// (only in the new); a line with Op '…' stands for unchanged lines left out.
type DiffLine struct {
	Op   string
	Text string
}

// maxDiffLines bounds the texts Diff compares line by line (the comparison costs their
// product); longer ones are shown whole, old then new.
const maxDiffLines = 600

// diffContext is how many unchanged lines are kept around a change.
const diffContext = 3

// Diff is a line diff of old and new (a longest common subsequence), unchanged runs cut to
// diffContext lines around each change.
func Diff(old, new string) []DiffLine {
	a, b := strings.Split(old, "\n"), strings.Split(new, "\n")
	if old == "" {
		a = nil
	}
	if new == "" {
		b = nil
	}
	var full []DiffLine
	if len(a) > maxDiffLines || len(b) > maxDiffLines {
		for _, l := range a {
			full = append(full, DiffLine{"-", l})
		}
		for _, l := range b {
			full = append(full, DiffLine{"+", l})
		}
		return full
	}
	// lcs[i][j] is the length of the longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			full = append(full, DiffLine{" ", a[i]})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			full = append(full, DiffLine{"-", a[i]})
			i++
		default:
			full = append(full, DiffLine{"+", b[j]})
			j++
		}
	}
	return trimContext(full)
}

// trimContext replaces unchanged runs further than diffContext lines from a change with one
// '…' line.
func trimContext(lines []DiffLine) []DiffLine {
	near := make([]bool, len(lines))
	for k, l := range lines {
		if l.Op != " " {
			for d := max(0, k-diffContext); d <= min(len(lines)-1, k+diffContext); d++ {
				near[d] = true
			}
		}
	}
	var out []DiffLine
	for k, l := range lines {
		switch {
		case near[k]:
			out = append(out, l)
		case len(out) == 0 || out[len(out)-1].Op != "…":
			out = append(out, DiffLine{"…", ""})
		}
	}
	return out
}
