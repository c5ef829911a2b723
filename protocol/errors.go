package protocol

import "errors"

// ErrMalformed is wrapped by every decode error of this package: the body is
// not JSON of the expected shape. A server answers it with CodeBadRequest.
var ErrMalformed = errors.New("protocol: malformed request")

// ReplyError is the machine-readable refusal a reply carries in its "error"
// field. It is an error, so a caller can return it as one.
type ReplyError struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// Refuse builds a refusal with err's text as its message.
func Refuse(code Code, err error) *ReplyError {
	return &ReplyError{Code: code, Message: err.Error()}
}

func (e *ReplyError) Error() string { return string(e.Code) + ": " + e.Message }
