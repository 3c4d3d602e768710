// Package pastable builds the commands the gateway prints for a person to run — in a refusal, a
// log line, an approval request, a status hint — so that each runs as printed, from any
// directory: it names the binary as it was invoked and the config file the process was started
// with, as an absolute path.
//
// The binary and the config are the process's own (one gateway per process), set once by the
// command that starts it.
package pastable

import (
	"path/filepath"
	"strings"
	"sync"
)

var (
	mu     sync.RWMutex
	binary = "mcp-gateway"
	config string
)

// SetBinary records how the binary was invoked (os.Args[0]): a bare name, which the shell found
// on PATH, stays as it is; a path becomes absolute.
func SetBinary(argv0 string) {
	if argv0 == "" {
		return
	}
	if strings.ContainsRune(argv0, filepath.Separator) || strings.ContainsRune(argv0, '/') {
		if abs, err := filepath.Abs(argv0); err == nil {
			argv0 = abs
		}
	}
	mu.Lock()
	binary = argv0
	mu.Unlock()
}

// SetConfig records the config file the process was started with; "" forgets it.
func SetConfig(path string) {
	if path != "" {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
	}
	mu.Lock()
	config = path
	mu.Unlock()
}

// Command is the command line that runs the subcommand args: the binary, args, then -c and the
// config file when one is set. Words the shell would split or expand are single-quoted.
func Command(args ...string) string {
	mu.RLock()
	bin, cfg := binary, config
	mu.RUnlock()
	words := make([]string, 0, len(args)+3)
	words = append(words, Quote(bin))
	for _, a := range args {
		words = append(words, Quote(a))
	}
	if cfg != "" {
		words = append(words, "-c", Quote(cfg))
	}
	return strings.Join(words, " ")
}

// Quote returns s as one shell word: unchanged when it holds only characters no shell treats
// specially, else in single quotes.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
