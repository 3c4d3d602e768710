package upstream

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// timeoutKey is how the timeout argument appears in a call's arguments. Arguments that do not
// contain it, nearly all of them, are not decoded at all.
var timeoutKey = []byte(`"timeout_sec"`)

// Deadline is the seed rule of SPEC.md §4 for how long one call on the server may take. If args
// is a JSON object whose "timeout_sec" member is a positive finite number, the deadline is
// max(call_timeout_sec, timeout_sec + timeout_argument_margin_sec); otherwise it is
// call_timeout_sec. A call_timeout_sec that is not positive means the default (300 s);
// timeout_argument_margin_sec is taken as configured (the loader supplies its default of 60 s),
// a negative one counts as 0. Very large values saturate at the longest time.Duration.
func Deadline(cfg config.Server, args json.RawMessage) time.Duration {
	base := seconds(cfg.CallTimeoutSec, config.DefaultCallTimeoutSec)
	requested, ok := timeoutArgument(args)
	if !ok {
		return base
	}
	return max(base, duration(requested+max(cfg.TimeoutArgumentMarginSec, 0)))
}

// timeoutArgument returns the positive finite number args holds under the exact key
// "timeout_sec". Strings, NaN, infinities, zero and negative numbers do not count.
func timeoutArgument(args json.RawMessage) (float64, bool) {
	if !bytes.Contains(args, timeoutKey) {
		return 0, false
	}
	// A map keeps keys exact: decoding into a struct would also match "Timeout_Sec".
	var members map[string]json.RawMessage
	if json.Unmarshal(args, &members) != nil {
		return 0, false
	}
	raw := members["timeout_sec"]
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false // absent, or not a JSON number
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// seconds converts a configured number of seconds, using def when v is not positive.
func seconds(v, def float64) time.Duration {
	if !(v > 0) {
		v = def
	}
	return duration(v)
}

// duration converts seconds to a Duration, saturating instead of overflowing.
func duration(sec float64) time.Duration {
	if sec >= float64(math.MaxInt64)/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(sec * float64(time.Second))
}
