//go:build race

package gateway

// raceEnabled: tests run under the race detector, several times slower.
const raceEnabled = true
