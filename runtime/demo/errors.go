package demo

import "errors"

// ErrFail is the error of a step that ran the /fail directive.
var ErrFail = errors.New("demo: /fail directive")
