package main

import (
	"fmt"
	"math"
	"strconv"
)

// Calculate evaluates an arithmetic expression: numbers (decimals such as
// 2.5 or .5, no exponents), + - * / between them, unary minus (and plus),
// parentheses, spaces anywhere between tokens. It is the calculator tool:
// the result is rendered by FormatNumber, division by zero is
// ErrDivisionByZero, anything it cannot parse ErrSyntax (with the byte
// offset), a result beyond float64 ErrOutOfRange.
func Calculate(expr string) (float64, error) {
	if len(expr) > maxExprBytes {
		return 0, fmt.Errorf("%w: the expression has %d bytes, at most %d", ErrSyntax, len(expr), maxExprBytes)
	}
	p := &calc{src: expr}
	v, err := p.expr(0)
	if err != nil {
		return 0, err
	}
	if p.skip(); p.pos < len(p.src) {
		return 0, p.unexpected()
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, ErrOutOfRange
	}
	return v, nil
}

// FormatNumber renders a result as the tool answers it: an integral value
// as an integer ("84"), anything else in the shortest form that reads back
// exactly ("0.5", "0.30000000000000004", "1e+21").
func FormatNumber(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

const (
	maxExprBytes = 4096 // longer is refused
	maxDepth     = 64   // nested parentheses and unary signs
)

// calc is a recursive-descent parser over src:
//
//	expr   = term { ("+" | "-") term }
//	term   = unary { ("*" | "/") unary }
//	unary  = ("-" | "+") unary | primary
//	primary = number | "(" expr ")"
type calc struct {
	src string
	pos int
}

func (p *calc) expr(depth int) (float64, error) {
	v, err := p.term(depth)
	for err == nil {
		op := p.peek()
		if op != '+' && op != '-' {
			return v, nil
		}
		p.pos++
		var r float64
		if r, err = p.term(depth); op == '+' {
			v += r
		} else {
			v -= r
		}
	}
	return 0, err
}

func (p *calc) term(depth int) (float64, error) {
	v, err := p.unary(depth)
	for err == nil {
		op := p.peek()
		if op != '*' && op != '/' {
			return v, nil
		}
		p.pos++
		var r float64
		if r, err = p.unary(depth); err != nil {
			break
		}
		if op == '*' {
			v *= r
			continue
		}
		if r == 0 {
			return 0, ErrDivisionByZero
		}
		v /= r
	}
	return 0, err
}

func (p *calc) unary(depth int) (float64, error) {
	if depth > maxDepth {
		return 0, fmt.Errorf("%w: nested deeper than %d at offset %d", ErrSyntax, maxDepth, p.pos)
	}
	switch p.peek() {
	case '-':
		p.pos++
		v, err := p.unary(depth + 1)
		return -v, err
	case '+':
		p.pos++
		return p.unary(depth + 1)
	case '(':
		p.pos++
		v, err := p.expr(depth + 1)
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			return 0, p.unexpected()
		}
		p.pos++
		return v, nil
	}
	return p.number()
}

func (p *calc) number() (float64, error) {
	p.skip()
	start, digits, dot := p.pos, 0, false
	for ; p.pos < len(p.src); p.pos++ {
		c := p.src[p.pos]
		if c == '.' && !dot {
			dot = true
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		digits++
	}
	if digits == 0 {
		p.pos = start
		return 0, p.unexpected()
	}
	v, err := strconv.ParseFloat(p.src[start:p.pos], 64)
	if err != nil { // a number of hundreds of digits
		return 0, ErrOutOfRange
	}
	return v, nil
}

// peek skips spaces and returns the next byte (0 at the end).
func (p *calc) peek() byte {
	if p.skip(); p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

func (p *calc) skip() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t' || p.src[p.pos] == '\n') {
		p.pos++
	}
}

func (p *calc) unexpected() error {
	if p.pos >= len(p.src) {
		return fmt.Errorf("%w: unexpected end of the expression", ErrSyntax)
	}
	return fmt.Errorf("%w: unexpected %q at offset %d", ErrSyntax, p.src[p.pos], p.pos)
}
