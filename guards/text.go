package guards

// Byte classes shared by the hand-written scanners. They are ASCII-only on purpose: every
// built-in pattern (keys, tokens, addresses, numbers) is ASCII.

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

func isAlnum(c byte) bool { return isDigit(c) || isLetter(c) }

func isHex(c byte) bool { return isDigit(c) || 'a' <= c|0x20 && c|0x20 <= 'f' }

// isB64URL reports whether c is in the base64url alphabet (JWT segments, key bodies).
func isB64URL(c byte) bool { return isAlnum(c) || c == '-' || c == '_' }

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// before is the byte before i, or 0 at the start.
func before(s string, i int) byte {
	if i <= 0 {
		return 0
	}
	return s[i-1]
}

// at is s[i], or 0 past the end.
func at(s string, i int) byte {
	if i >= len(s) {
		return 0
	}
	return s[i]
}

// hasPrefixFold reports whether s[i:] starts with prefix, ignoring ASCII case; prefix must be
// lower-case.
func hasPrefixFold(s string, i int, prefix string) bool {
	if i < 0 || len(s)-i < len(prefix) {
		return false
	}
	for k := 0; k < len(prefix); k++ {
		if lower(s[i+k]) != prefix[k] {
			return false
		}
	}
	return true
}

// hasSuffixFold reports whether s ends with suffix, ignoring ASCII case; suffix is lower-case.
func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && hasPrefixFold(s, len(s)-len(suffix), suffix)
}
