package docs

import "errors"

var (
	// ErrNoSchema: the document has no component schema of that name.
	ErrNoSchema = errors.New("docs: no such schema")
	// ErrDocument: the embedded document does not parse, or a reference
	// in it does not resolve.
	ErrDocument = errors.New("docs: bad API document")
)
