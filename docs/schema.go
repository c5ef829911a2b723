package docs

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// openapi is docs/openapi.yaml as written.
//
//go:embed openapi.yaml
var openapi []byte

// OpenAPI returns the API description document, YAML as written.
func OpenAPI() []byte { return append([]byte(nil), openapi...) }

// componentPrefix begins every reference the document makes.
const componentPrefix = "#/components/schemas/"

// maxDepth bounds dereferencing: the document's schemas are not
// recursive, so a deeper nesting is a reference cycle.
const maxDepth = 32

var parsed = sync.OnceValues(func() (map[string]any, error) {
	var doc struct {
		Components struct {
			Schemas map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(openapi, &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDocument, err)
	}
	return doc.Components.Schemas, nil
})

// Names lists the document's component schemas.
func Names() ([]string, error) {
	schemas, err := parsed()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(schemas))
	for name := range schemas {
		out = append(out, name)
	}
	return out, nil
}

// Schema returns the component schema name as one JSON Schema document:
// every "$ref" to another component replaced by that component's schema
// (recursively), nothing else changed. An unknown name is ErrNoSchema; a
// reference that does not resolve, or a cycle, is ErrDocument.
func Schema(name string) (json.RawMessage, error) {
	schemas, err := parsed()
	if err != nil {
		return nil, err
	}
	s, ok := schemas[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoSchema, name)
	}
	out, err := deref(schemas, s, 0)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	return json.Marshal(out)
}

// deref returns v with every component reference inlined.
func deref(schemas map[string]any, v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: references nest deeper than %d (a cycle?)", ErrDocument, maxDepth)
	}
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			target, ok := schemas[strings.TrimPrefix(ref, componentPrefix)]
			if !ok || !strings.HasPrefix(ref, componentPrefix) {
				return nil, fmt.Errorf("%w: $ref %q does not resolve", ErrDocument, ref)
			}
			return deref(schemas, target, depth+1)
		}
		out := make(map[string]any, len(v))
		for k, x := range v {
			d, err := deref(schemas, x, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = d
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			d, err := deref(schemas, x, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = d
		}
		return out, nil
	}
	return v, nil
}

// JSON returns the document as JSON (what GET /v1/openapi.json serves):
// the YAML as written, converted once. Mapping keys that YAML reads as
// numbers (status codes) become strings.
func JSON() ([]byte, error) { return asJSON() }

var asJSON = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(openapi, &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDocument, err)
	}
	b, err := json.Marshal(stringKeys(doc))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDocument, err)
	}
	return b, nil
})

// stringKeys converts the maps YAML decodes with non-string keys into
// maps with string keys, recursively.
func stringKeys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = stringKeys(x)
		}
		return v
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[fmt.Sprint(k)] = stringKeys(x)
		}
		return out
	case []any:
		for i, x := range v {
			v[i] = stringKeys(x)
		}
		return v
	}
	return v
}
