// Package docs carries Baton's published API description,
// docs/openapi.yaml (OpenAPI 3.0.3), for programs that need it: the
// document as written ([OpenAPI]) and each of its component schemas
// bundled and dereferenced into one self-contained JSON Schema ([Schema]).
// The ingress's NATS micro endpoints publish their request and response
// schemas from here, so the HTTP description and the NATS one have one
// source.
//
// It imports no package of the project.
package docs
