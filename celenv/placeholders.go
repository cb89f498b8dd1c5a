package celenv

// Splitting a template scalar into literal text and (( expr )) placeholders.

import (
	"fmt"
	"strings"
)

// rawSegment is a piece of a scalar before compilation: literal text (with
// escapes resolved), or the source of one placeholder.
type rawSegment struct {
	text   string
	isExpr bool
}

// splitPlaceholders cuts s into text and (( expr )) placeholders. \(( is a
// literal ((. A placeholder ends at the first )) outside brackets and string
// literals of the expression, so (( string(size(x)) )) is one placeholder.
func splitPlaceholders(s string) ([]rawSegment, error) {
	var out []rawSegment
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], `\((`):
			b.WriteString("((")
			i += 3
		case strings.HasPrefix(s[i:], "(("):
			end, ok := placeholderEnd(s, i+2)
			if !ok {
				return nil, fmt.Errorf("unterminated (( at offset %d: no matching ))", i)
			}
			if b.Len() > 0 {
				out = append(out, rawSegment{text: b.String()})
				b.Reset()
			}
			out = append(out, rawSegment{text: strings.TrimSpace(s[i+2 : end]), isExpr: true})
			i = end + 2
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	if b.Len() > 0 {
		out = append(out, rawSegment{text: b.String()})
	}
	return out, nil
}

// placeholderEnd returns the index of the )) that closes the placeholder whose
// expression starts at start.
func placeholderEnd(s string, start int) (int, bool) {
	depth := 0
	for i := start; i < len(s); i++ {
		switch c := s[i]; c {
		case '(', '[', '{':
			depth++
		case ']', '}':
			depth = max(depth-1, 0)
		case ')':
			if depth == 0 && strings.HasPrefix(s[i:], "))") {
				return i, true
			}
			depth = max(depth-1, 0)
		case '\'', '"':
			end, ok := stringLiteralEnd(s, i)
			if !ok {
				return 0, false
			}
			i = end
		}
	}
	return 0, false
}

// stringLiteralEnd returns the index of the last quote of the CEL string
// literal whose opening quote is at s[i]: single, triple and raw (r'…') forms.
func stringLiteralEnd(s string, i int) (int, bool) {
	raw := i > 0 && (s[i-1] == 'r' || s[i-1] == 'R') && (i == 1 || !isIdentByte(s[i-2]))
	quote := s[i : i+1]
	if strings.HasPrefix(s[i:], strings.Repeat(quote, 3)) {
		quote = strings.Repeat(quote, 3)
	}
	for j := i + len(quote); j < len(s); j++ {
		switch {
		case !raw && s[j] == '\\':
			j++
		case strings.HasPrefix(s[j:], quote):
			return j + len(quote) - 1, true
		}
	}
	return 0, false
}

func isIdentByte(b byte) bool {
	return b == '_' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}
