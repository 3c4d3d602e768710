package argschema

import (
	"cmp"
	"math/big"
)

// decimal is a JSON number read exactly, as m × 10^e, for the fast path's integer checks,
// bounds and enum values. The library compares numbers as exact rationals, so a float64 would
// not do: 9007199254740993 is not 9007199254740992. A decimal holds at most maxDecimalDigits
// significant digits, which fit a uint64 even after the scaling in cmp; a number with more is
// left to the library.
type decimal struct {
	neg    bool
	m      uint64 // without trailing zeros; 0 for zero
	digits int    // how many digits m has
	e      int
}

const maxDecimalDigits = 19

var pow10 = [maxDecimalDigits + 1]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// parseDecimal reads lit, a number literal that follows the JSON grammar. Trailing zeros are
// folded into the exponent, so 3.0, 30e-1 and 3 are the same decimal and 1e1 is an integer.
func parseDecimal(lit []byte) (d decimal, ok bool) {
	i := 0
	if lit[0] == '-' {
		d.neg = true
		i++
	}
	zeros := 0 // zeros read since the last non-zero digit, not yet in m
	fraction, scale := false, 0
	for ; i < len(lit) && lit[i] != 'e' && lit[i] != 'E'; i++ {
		c := lit[i]
		if c == '.' {
			fraction = true
			continue
		}
		if fraction {
			scale--
		}
		switch {
		case c == '0' && d.m == 0: // a leading zero
		case c == '0':
			zeros++
		case d.digits+zeros+1 > maxDecimalDigits:
			return decimal{}, false
		default:
			d.m = d.m*pow10[zeros+1] + uint64(c-'0')
			d.digits += zeros + 1
			zeros = 0
		}
	}
	exp, neg := 0, false
	if i < len(lit) {
		i++
		if lit[i] == '+' || lit[i] == '-' {
			neg = lit[i] == '-'
			i++
		}
		for ; i < len(lit); i++ {
			if exp = exp*10 + int(lit[i]-'0'); exp > 1e6 {
				return decimal{}, false
			}
		}
	}
	if neg {
		exp = -exp
	}
	if d.m == 0 {
		return decimal{}, true
	}
	d.e = exp + scale + zeros
	return d, true
}

// decimalOf is the decimal equal to r, if there is one; for numbers in a schema, which the
// library holds as big.Rat.
func decimalOf(r *big.Rat) (decimal, bool) {
	// r is a finite decimal if its denominator is 2^a × 5^b; it then has max(a, b) digits after
	// the point.
	den := new(big.Int).Set(r.Denom())
	twos := den.TrailingZeroBits()
	den.Rsh(den, twos)
	five, rem := big.NewInt(5), new(big.Int)
	fives := uint(0)
	for {
		q, m := new(big.Int).QuoRem(den, five, rem)
		if m.Sign() != 0 {
			break
		}
		den, fives = q, fives+1
	}
	if den.Cmp(big.NewInt(1)) != 0 {
		return decimal{}, false
	}
	return parseDecimal([]byte(r.FloatString(int(max(twos, fives)))))
}

// isInt reports whether d is an integer, as the library's "integer" type means it: any number
// with no fractional part, however it is written.
func (d decimal) isInt() bool { return d.m == 0 || d.e >= 0 }

func (d decimal) sign() int {
	switch {
	case d.m == 0:
		return 0
	case d.neg:
		return -1
	}
	return 1
}

// cmp compares d and o exactly, like big.Rat's Cmp.
func (d decimal) cmp(o decimal) int {
	if ds, os := d.sign(), o.sign(); ds != os || ds == 0 {
		return cmp.Compare(ds, os)
	}
	// Compare magnitudes: first by the position of the leading digit, then digit by digit,
	// with the shorter m scaled to the longer one's length (at most maxDecimalDigits).
	c := cmp.Compare(d.digits+d.e, o.digits+o.e)
	if c == 0 {
		dm, om := d.m, o.m
		if d.digits < o.digits {
			dm *= pow10[o.digits-d.digits]
		} else {
			om *= pow10[d.digits-o.digits]
		}
		c = cmp.Compare(dm, om)
	}
	if d.neg {
		return -c
	}
	return c
}
