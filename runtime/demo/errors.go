package demo

import "errors"

// ErrFail is the error of a step that ran the /fail directive.
var ErrFail = errors.New("demo: /fail directive")

// ErrFlaky is the transient error (marked runtime.Retryable) of a /flaky
// step's failing attempts.
var ErrFlaky = errors.New("demo: /flaky directive")
