package ingress

import (
	"fmt"
	"sync"

	"github.com/baton-rt/baton/docs"
)

// Schemas in the micro services. Every endpoint carries, in its metadata
// (nats micro info), the JSON Schema of its request body, of its answer
// and of its error body, bundled and dereferenced from the API description
// docs/openapi.yaml (package docs): one source for HTTP and NATS.
const (
	MetaRequestSchema  = "request_schema"
	MetaResponseSchema = "response_schema"
	MetaErrorSchema    = "error_schema"
)

// operationSchemas names each operation's request and response component
// schemas in docs/openapi.yaml. A runtime-only operation takes any body
// and always answers an error.
var operationSchemas = map[string][2]string{
	"create":    {"CreateRequest", "Created"},
	"deliver":   {"DeliveryRequest", "Receipt"},
	"cancel":    {"NatsControlRequest", "Receipt"},
	"reset":     {"NatsControlRequest", "Receipt"},
	"clear":     {"NatsControlRequest", "Receipt"},
	"compact":   {"NatsControlRequest", "Receipt"},
	"input":     {"NatsInputRequest", "Receipt"},
	"authorize": {"NatsAuthorizeRequest", "Receipt"},
	"tag":       {"NatsTagRequest", "Receipt"},
	"end":       {"NatsEndRequest", "Receipt"},
	"delete":    {"NatsDeleteRequest", "DeleteResult"},
	"status":    {"NatsStatusRequest", "Status"},
	"command":   {"NatsCommandRequest", "CommandOutcome"},
	"events":    {"NatsEventsRequest", "EventPage"},
	"blob":      {"NatsBlobRequest", "BlobChunk"},
	// the admin service's
	"admin.sessions": {"ListRequest", "SessionList"},
}

// anySchema is the request schema of a runtime-only operation (any body:
// it is refused whatever it holds) and, with errorOnly, its answer.
const anySchema = `{}`

// errorSchemaName is the error body's component schema.
const errorSchemaName = "Error"

// endpointMetadata is every operation's schema metadata, built once from
// the embedded document.
var endpointMetadata = sync.OnceValues(func() (map[string]map[string]string, error) {
	errSchema, err := docs.Schema(errorSchemaName)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for op, names := range operationSchemas {
		req, err := docs.Schema(names[0])
		if err != nil {
			return nil, fmt.Errorf("operation %s: %w", op, err)
		}
		resp, err := docs.Schema(names[1])
		if err != nil {
			return nil, fmt.Errorf("operation %s: %w", op, err)
		}
		out[op] = map[string]string{MetaRequestSchema: string(req), MetaResponseSchema: string(resp), MetaErrorSchema: string(errSchema)}
	}
	for _, op := range RuntimeOnlyOperations {
		out[op] = map[string]string{MetaRequestSchema: anySchema, MetaResponseSchema: string(errSchema), MetaErrorSchema: string(errSchema)}
	}
	return out, nil
})

// schemaMetadata is operation op's endpoint metadata; an operation
// without schemas is a programming error, reported as one.
func schemaMetadata(op string) (map[string]string, error) {
	all, err := endpointMetadata()
	if err != nil {
		return nil, fmt.Errorf("ingress: the API description: %w", err)
	}
	md, ok := all[op]
	if !ok {
		return nil, fmt.Errorf("ingress: operation %s has no schemas in the API description", op)
	}
	return md, nil
}
