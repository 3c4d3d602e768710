package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// result is one scenario's outcome in one run of the suite.
type result struct {
	found                      bool // checks.json or a SUMMARY line was seen
	success, failure, warnings int
	exitCode                   int // of the suite, where one suite run is one scenario (client); else 0
	timedOut                   bool
	unscored                   string   // "extension", "pending"... when the suite does not score it
	findings                   []string // messages of the FAILURE and WARNING checks
}

// pass is the suite's own criterion (its expected-failures check): no FAILURE and no WARNING.
func (r *result) pass() bool {
	return r != nil && r.found && r.failure == 0 && r.warnings == 0 && r.exitCode == 0 && !r.timedOut
}

func (r *result) cell() string {
	switch {
	case r == nil || !r.found && r.timedOut:
		return "**FAIL** (timed out, no result)"
	case !r.found:
		return "**FAIL** (no result)"
	}
	counts := fmt.Sprintf("%d/%d", r.success, r.success+r.failure)
	var extra []string
	switch {
	case r.warnings == 1:
		extra = append(extra, "1 warning")
	case r.warnings > 1:
		extra = append(extra, fmt.Sprintf("%d warnings", r.warnings))
	}
	if r.timedOut {
		extra = append(extra, "timed out")
	} else if r.exitCode != 0 {
		extra = append(extra, fmt.Sprintf("exit %d", r.exitCode))
	}
	if len(extra) > 0 {
		counts += ", " + strings.Join(extra, ", ")
	}
	if r.pass() {
		return "pass (" + counts + ")"
	}
	if r.failure == 0 && r.exitCode == 0 && !r.timedOut {
		// Only SHOULD-level findings: the suite's summary ticks the scenario, its
		// expected-failures check (and this runner) count it as not passing.
		return "**WARN** (" + counts + ")"
	}
	return "**FAIL** (" + counts + ")"
}

type check struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// The suite names a result directory [server-]<scenario>-<ISO time with : and . as ->.
var resultDir = regexp.MustCompile(`^(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// readResults reads every checks.json under dir (one directory per scenario).
func readResults(dir, prefix string) (map[string]*result, error) {
	out := map[string]*result{}
	files, err := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		m := resultDir.FindStringSubmatch(filepath.Base(filepath.Dir(f)))
		if m == nil {
			continue
		}
		name := strings.TrimPrefix(m[1], prefix)
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var checks []check
		if err := json.Unmarshal(b, &checks); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		r := &result{found: true}
		for _, c := range checks {
			switch c.Status {
			case "SUCCESS":
				r.success++
			case "FAILURE":
				r.failure++
			case "WARNING":
				r.warnings++
			}
			if c.Status == "FAILURE" || c.Status == "WARNING" {
				r.addFinding(c)
			}
		}
		out[name] = r
	}
	return out, nil
}

var (
	summaryLine  = regexp.MustCompile(`^[✓✗] (\S+): (\d+) passed, (\d+) failed`)
	unscoredLine = regexp.MustCompile(`^\s+[✓✗] (\S+) \(([^)]+)\)\s*$`)
)

// readSummary reads the suite's log: a scenario in its SUMMARY without a checks.json becomes a
// result (its counts), and the "Not scored for ..." block marks scenarios as unscored.
func readSummary(logPath string, results map[string]*result) error {
	f, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	inSummary, inUnscored := false, false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "=== SUMMARY ==="):
			inSummary = true
			continue
		case strings.HasPrefix(line, "Not scored for"):
			inUnscored = true
			continue
		}
		if inSummary {
			if m := summaryLine.FindStringSubmatch(line); m != nil {
				if _, ok := results[m[1]]; !ok {
					p, _ := strconv.Atoi(m[2])
					fl, _ := strconv.Atoi(m[3])
					results[m[1]] = &result{found: true, success: p, failure: fl}
				}
			}
		}
		if inUnscored {
			if m := unscoredLine.FindStringSubmatch(line); m != nil {
				if r, ok := results[m[1]]; ok {
					r.unscored = m[2]
				}
			} else if strings.TrimSpace(line) != "" {
				inUnscored = false
			}
		}
	}
	return sc.Err()
}

// addFinding keeps a short, single-line message of a failed check (each message once).
func (r *result) addFinding(c check) {
	msg := c.ErrorMessage
	if msg == "" {
		msg = c.Name
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 240 {
		msg = msg[:240] + "…"
	}
	msg = c.Status + " " + c.ID + ": " + msg
	for _, f := range r.findings {
		if f == msg {
			return
		}
	}
	r.findings = append(r.findings, msg)
}
