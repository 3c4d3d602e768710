package limits

import "math"

// bucket is the state of one key of one limit: a token bucket refilled on use and the calls of
// the key holding a concurrent slot. It is a value in its shard's map, so a key costs no
// allocation of its own (bytesPerKey).
type bucket struct {
	tokens   float64 // tokens left at last; at most the burst
	last     int64   // nanoseconds since the limiter's epoch of the last refill
	inFlight int32   // calls holding a concurrent slot
}

// refill adds the tokens earned since the last refill, up to burst. perNano is the refill rate
// in tokens per nanosecond.
func (b *bucket) refill(now int64, perNano, burst float64) {
	if now > b.last {
		b.tokens = math.Min(burst, b.tokens+float64(now-b.last)*perNano)
		b.last = now
	}
}

// idle reports whether the bucket is full again and no call holds a slot: dropping it changes
// nothing, since a new bucket starts full.
func (b *bucket) idle(now int64, perNano, burst float64) bool {
	if b.inFlight > 0 {
		return false
	}
	if perNano == 0 {
		return true
	}
	return b.tokens+float64(now-b.last)*perNano >= burst-epsilon
}

// retryAfterSec rounds a wait in seconds up to whole seconds, at least 1. A microsecond of
// slack keeps the rounding of the refill from adding a second.
func retryAfterSec(wait float64) int {
	return max(int(math.Ceil(wait-1e-6)), 1)
}
