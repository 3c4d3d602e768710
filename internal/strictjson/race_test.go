//go:build race

package strictjson

// raceEnabled: the race detector drops sync.Pool items at random, so allocation counts differ.
const raceEnabled = true
