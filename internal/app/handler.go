package app

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
)

// tidy is a slog.Handler in front of the output handler that keeps each
// line honest: every key once (the innermost value wins, so a With on the
// way down and an attribute of the record never print "deployment" twice)
// and no attribute without a value (a nil error, a nil pointer: never
// "err=<nil>"). It holds the With attributes itself and adds them to each
// record, so it can see them all; a group starts a fresh namespace.
type tidy struct {
	inner slog.Handler
	attrs []slog.Attr // With attributes not yet passed to inner
}

func newTidy(inner slog.Handler) *tidy { return &tidy{inner: inner} }

func (h *tidy) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *tidy) WithAttrs(as []slog.Attr) slog.Handler {
	return &tidy{inner: h.inner, attrs: merge(slices.Clone(h.attrs), as)}
}

// WithGroup hands the attributes so far to the inner handler, outside the
// group.
func (h *tidy) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &tidy{inner: h.inner.WithAttrs(h.attrs).WithGroup(name)}
}

func (h *tidy) Handle(ctx context.Context, r slog.Record) error {
	as := slices.Clone(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		as = merge(as, []slog.Attr{a})
		return true
	})
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(as...)
	return h.inner.Handle(ctx, out)
}

// merge appends each attribute of add to as, replacing one of the same key
// in place; empty ones are dropped.
func merge(as, add []slog.Attr) []slog.Attr {
	for _, a := range add {
		if empty(a) {
			continue
		}
		if i := slices.IndexFunc(as, func(b slog.Attr) bool { return b.Key == a.Key }); i >= 0 {
			as[i] = a
			continue
		}
		as = append(as, a)
	}
	return as
}

// empty reports an attribute with no key or with a nil value (a nil
// interface, pointer, map, slice or func).
func empty(a slog.Attr) bool {
	if a.Key == "" {
		return true
	}
	if a.Value.Kind() != slog.KindAny {
		return false
	}
	v := a.Value.Any()
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

// durationString renders a duration as a Go duration string ("30s"), not
// as nanoseconds: the JSON handler's default is an integer.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
