//go:build race

package limits

// raceEnabled: tests run under the race detector, several times slower.
const raceEnabled = true
