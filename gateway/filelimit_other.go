//go:build !unix

package gateway

// openFileLimit is 0: this system has no open-file limit the gateway can read.
func openFileLimit() uint64 { return 0 }
