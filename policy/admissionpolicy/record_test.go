package admissionpolicy

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// escapeLikeCEL applies jsonEscapes in order, as the generated chain of replace calls does.
func escapeLikeCEL(s string) string {
	for _, e := range jsonEscapes {
		s = strings.ReplaceAll(s, e[0], e[1])
	}
	return s
}

// The replace chain writes what encoding/json writes (policy.EncodeChanges, the webhook's record) for
// every character, alone and next to a backslash and a quote, so that the two engines' records agree
// byte for byte and no value can end its string early. The e2e test TestAdmissionPolicyRecordEscaping
// runs the generated CEL itself in the API server.
func TestEscapeChainIsEncodingJSON(t *testing.T) {
	if jsonEscapes[0][0] != `\` {
		t.Fatal("the backslash must be escaped first: the other escapes add backslashes")
	}
	if n := strings.Count(escapeChain, ".replace("); n != len(jsonEscapes) {
		t.Fatalf("%d replace calls for %d escapes", n, len(jsonEscapes))
	}
	re := regexp.MustCompile(needsEscape) // RE2, as CEL's matches
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		if re.MatchString(string(r)) != (escapeLikeCEL(string(r)) != string(r)) {
			t.Fatalf("%U: the guard %s matches it %v, but the chain changes it %v", r, needsEscape, re.MatchString(string(r)), escapeLikeCEL(string(r)) != string(r))
		}
		for _, s := range []string{string(r), `\` + string(r) + `"`} {
			b, _ := json.Marshal(s)
			if want := string(b[1 : len(b)-1]); escapeLikeCEL(s) != want {
				t.Fatalf("%U: the chain writes %q, encoding/json %q", r, escapeLikeCEL(s), want)
			}
		}
	}
}

// Constants are encoded by encoding/json itself and written as CEL literals.
func TestTextOfConstants(t *testing.T) {
	for s, want := range map[string]string{
		`plain`:             `'plain'`,
		`it's "quoted" \ <`: `'it\'s \\"quoted\\" \\\\ \\u003c'`,
		"tab\there":         `'tab\\there'`,
	} {
		if got := text(s).cel; got != want {
			t.Errorf("text(%q) = %s, want %s", s, got, want)
		}
	}
}
