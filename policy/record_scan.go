package policy

// The record is read on every review of an object that has one (in hybrid mode, every pod the
// admission policies changed first), so its entries are read as spans of the annotation's own bytes
// rather than through encoding/json, which copies every raw value. The document is validated first
// (json.Valid), so the scanner only has to find where each value ends.

// skipSpace returns i past JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the end of the JSON value starting at b[i], in a valid document.
func valueEnd(b []byte, i int) int {
	depth, inString := 0, false
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
				if depth == 0 {
					return i + 1
				}
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth == 0 { // the end of the enclosing value: a scalar ends here
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return i
		}
	}
	return i
}

// elements calls f with each element of the JSON array b (valid) as a span of b; false when b is not
// an array or f says stop.
func elements(b []byte, f func(e []byte) bool) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return true
	}
	for i < len(b) {
		end := valueEnd(b, i)
		if !f(b[i:end]) {
			return false
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ',' {
			break
		}
		i = skipSpace(b, i+1)
	}
	return true
}

// members calls f with each key (its JSON text, quotes included) and value of the JSON object b
// (valid) as spans of b; false when b is not an object.
func members(b []byte, f func(key, value []byte)) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		kend := valueEnd(b, i)
		key := b[i:kend]
		i = skipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		vend := valueEnd(b, i)
		f(key, b[i:vend])
		i = skipSpace(b, vend)
		if i >= len(b) || b[i] != ',' {
			break
		}
		i = skipSpace(b, i+1)
	}
	return true
}
