//go:build !unix

package store

// processAlive cannot probe a process here, so it assumes the owner is running: the message then
// names it as the holder, which is the likelier case.
func processAlive(int) bool { return true }
