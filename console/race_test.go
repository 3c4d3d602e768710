//go:build race

package console

// The race detector makes this code several times slower; the bounds of the scale test stretch
// with it, and its relative checks (a page reads no more than a page) stay as they are.
func init() { slowdown = 10 }
