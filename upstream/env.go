package upstream

import (
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// baseEnv are the variables of the gateway's environment every stdio child gets, when they are
// set: what a program needs to find executables, its home and temporary directory, and to speak
// the machine's language and time zone. None of them holds a credential. Everything else comes
// through the server's env_inherit or env.
var baseEnv = []string{"HOME", "LANG", "LANGUAGE", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER", "XDG_RUNTIME_DIR"}

// baseEnvPrefix makes the locale categories (LC_ALL, LC_CTYPE, LC_TIME…) part of the base too.
const baseEnvPrefix = "LC_"

// inBase reports whether name is one of the base variables.
func inBase(name string) bool {
	return strings.HasPrefix(name, baseEnvPrefix) || slices.Contains(baseEnv, name)
}

// childEnv is the environment of a child of server s, from environ, the gateway's environment
// (os.Environ()): the base variables and those s's env_inherit names, or all of them with
// env_inherit: all, but never a variable the gateway reads a secret from; then s's env set over
// them (the file's values, trusted, even under a secret variable's name). A name twice in
// environ counts once, with its first value, as os.Getenv reads it. The result is never nil: a
// nil Env would make exec pass the whole environment.
func childEnv(s config.Server, environ []string) []string {
	env := make([]string, 0, len(s.Env)+len(baseEnv))
	seen := make(map[string]bool, len(environ))
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || seen[name] {
			continue
		}
		seen[name] = true
		if _, set := s.Env[name]; set || s.EnvInherit.IsSecret(name) {
			continue
		}
		if inBase(name) || s.EnvInherit.Inherits(name) {
			env = append(env, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		env = append(env, k+"="+s.Env[k])
	}
	return env
}

// sameEnv reports whether a child started under a gets the same environment as one started under
// b, the gateway's environment being what it is now. A reload that changes a server's env,
// env_inherit, or which variables hold the gateway's secrets, restarts the server only if its
// child's environment changes; one kept running gets what a new child would get.
func sameEnv(a, b config.Server) bool {
	if a.Transport() != config.TransportStdio && b.Transport() != config.TransportStdio {
		return true
	}
	environ := os.Environ()
	return slices.Equal(childEnv(a, environ), childEnv(b, environ))
}
