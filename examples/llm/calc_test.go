package main

import (
	"errors"
	"strings"
	"testing"
)

// The calculator's grammar: + - * / with precedence and left
// associativity, parentheses, unary minus and plus, decimals, spaces; the
// errors a model reads.
func TestCalculate(t *testing.T) {
	for _, tc := range []struct {
		expr, want string
		err        error
	}{
		{"12*7", "84", nil},
		{"1 + 2 * 3", "7", nil},
		{"(1 + 2) * 3", "9", nil},
		{"10 - 4 - 3", "3", nil},
		{"64 / 4 / 2", "8", nil},
		{"-5 + 2", "-3", nil},
		{"2 * -3", "-6", nil},
		{"--4", "4", nil},
		{"-(2 + 3)", "-5", nil},
		{"+7", "7", nil},
		{"3.5 * 2", "7", nil},
		{".5 + .25", "0.75", nil},
		{"1 / 3", "0.3333333333333333", nil},
		{"0.1 + 0.2", "0.30000000000000004", nil},
		{"7 / 2", "3.5", nil},
		{"5.", "5", nil},
		{" ( ( 1 ) ) ", "1", nil},
		{"1e6", "", ErrSyntax},
		{"1000000 * 1000000 * 1000000", "1e+18", nil},
		{"0 - 0", "0", nil},
		{"1 / 0", "", ErrDivisionByZero},
		{"1 / (2 - 2)", "", ErrDivisionByZero},
		{"", "", ErrSyntax},
		{"2 +", "", ErrSyntax},
		{"2 + * 3", "", ErrSyntax},
		{"(1 + 2", "", ErrSyntax},
		{"1 + 2)", "", ErrSyntax},
		{"2 3", "", ErrSyntax},
		{"1..2", "", ErrSyntax},
		{".", "", ErrSyntax},
		{"2^3", "", ErrSyntax},
		{"abc", "", ErrSyntax},
		{"sqrt(4)", "", ErrSyntax},
		{strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100), "", ErrSyntax},
		{strings.Repeat("1", 400), "", ErrOutOfRange},
		{strings.Repeat("9", 300) + " * " + strings.Repeat("9", 300), "", ErrOutOfRange},
		{strings.Repeat("1+", 3000) + "1", "", ErrSyntax},
	} {
		v, err := Calculate(tc.expr)
		label := tc.expr
		if len(label) > 40 {
			label = label[:40] + "…"
		}
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("Calculate(%q) = %v, %v; want %v", label, v, err, tc.err)
			}
			continue
		}
		if err != nil || FormatNumber(v) != tc.want {
			t.Errorf("Calculate(%q) = %s, %v; want %s", label, FormatNumber(v), err, tc.want)
		}
	}
}

// A syntax error names what it found and where.
func TestCalculateSyntaxMessage(t *testing.T) {
	_, err := Calculate("2 + * 3")
	if err == nil || err.Error() != `calculator: syntax error: unexpected '*' at offset 4` {
		t.Fatalf("error %v", err)
	}
	_, err = Calculate("(1")
	if err == nil || err.Error() != "calculator: syntax error: unexpected end of the expression" {
		t.Fatalf("error %v", err)
	}
}
