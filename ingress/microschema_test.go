package ingress_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/nats-io/nats.go/micro"
	valschema "github.com/santhosh-tekuri/jsonschema/v6"
)

// Every NATS exchange of the ingress tests is held to the schemas the
// micro service publishes (nats micro info): an answered request's body
// against the endpoint's request_schema and its answer against
// response_schema; a refusal's body against error_schema.

// endpointSchemas are one endpoint's compiled schemas.
type endpointSchemas struct{ request, response, errors *valschema.Schema }

var (
	schemasMu sync.Mutex
	schemasOf = map[*env]map[string]endpointSchemas{}
)

// serviceSchemas reads $SRV.INFO of service on e's server and compiles
// every endpoint's schemas, by endpoint subject; every endpoint must carry
// all three.
func serviceSchemas(t *testing.T, e *env, service string) map[string]endpointSchemas {
	t.Helper()
	schemasMu.Lock()
	defer schemasMu.Unlock()
	if m, ok := schemasOf[e]; ok {
		return m
	}
	msg, err := e.NC.Request("$SRV.INFO."+service, nil, 10*time.Second)
	if err != nil {
		t.Fatalf("$SRV.INFO.%s: %v", service, err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	m := map[string]endpointSchemas{}
	for _, ep := range info.Endpoints {
		m[ep.Subject] = endpointSchemas{
			request:  compileSchema(t, ep.Name+" request", ep.Metadata[ingress.MetaRequestSchema]),
			response: compileSchema(t, ep.Name+" response", ep.Metadata[ingress.MetaResponseSchema]),
			errors:   compileSchema(t, ep.Name+" error", ep.Metadata[ingress.MetaErrorSchema]),
		}
	}
	schemasOf[e] = m
	t.Cleanup(func() {
		schemasMu.Lock()
		delete(schemasOf, e)
		schemasMu.Unlock()
	})
	return m
}

// compileSchema compiles a schema from endpoint metadata; a missing or
// broken one fails the test.
func compileSchema(t *testing.T, what, schema string) *valschema.Schema {
	t.Helper()
	if schema == "" {
		t.Fatalf("%s: no schema in the endpoint metadata", what)
	}
	if strings.Contains(schema, `"$ref"`) {
		t.Fatalf("%s: the schema is not dereferenced: %s", what, schema)
	}
	doc, err := valschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	c := valschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return s
}

// checkExchange validates one exchange on subject against the schemas the
// service publishes for it.
func checkExchange(t *testing.T, e *env, service, subject string, body, answer []byte, refused bool) {
	t.Helper()
	s, ok := serviceSchemas(t, e, service)[subject]
	if !ok {
		t.Fatalf("no endpoint of %s on %s", service, subject)
	}
	if refused {
		validate(t, subject+" error", s.errors, answer)
		return
	}
	validate(t, subject+" request", s.request, body)
	validate(t, subject+" response", s.response, answer)
}

func validate(t *testing.T, what string, s *valschema.Schema, b []byte) {
	t.Helper()
	v, err := valschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v: %s", what, err, b)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("%s does not match its published schema: %v\n%s", what, err, b)
	}
}

// nats micro info shows every endpoint's schemas: each endpoint of the
// agent's service, of the deprecated one and of the admin service carries
// a request, a response and an error schema that compile, dereferenced;
// a runtime-only endpoint's answer is the error body.
func TestMicroSchemas(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, service := range []string{ingress.AgentServiceName("default"), ingress.ServiceName, ingress.AdminServiceName} {
		msg, err := e.NC.Request("$SRV.INFO."+service, nil, 10*time.Second)
		if err != nil {
			t.Fatalf("$SRV.INFO.%s: %v", service, err)
		}
		var info micro.Info
		if err := json.Unmarshal(msg.Data, &info); err != nil {
			t.Fatal(err)
		}
		want := len(ingress.Operations) + len(ingress.RuntimeOnlyOperations)
		if service == ingress.AdminServiceName {
			want = len(ingress.AdminOperations)
		}
		if len(info.Endpoints) != want {
			t.Fatalf("%s: %d endpoints, want %d", service, len(info.Endpoints), want)
		}
		for _, ep := range info.Endpoints {
			md, what := ep.Metadata, service+" "+ep.Name
			req := compileSchema(t, what+" request", md[ingress.MetaRequestSchema])
			resp := compileSchema(t, what+" response", md[ingress.MetaResponseSchema])
			errs := compileSchema(t, what+" error", md[ingress.MetaErrorSchema])
			errBody := []byte(`{"error":{"code":"not_found","message":"no session x"}}`)
			validate(t, what+" error", errs, errBody)
			refuses(t, what+" error", errs, []byte(`{"error":5}`))
			if strings.HasPrefix(ep.Name, "child") { // runtime-only: any body, always the error
				validate(t, what+" request", req, []byte(`{"anything":[1]}`))
				validate(t, what+" answer", resp, errBody)
				refuses(t, what+" answer", resp, []byte(`{}`))
				continue
			}
			refuses(t, what+" request", req, []byte(`{"noSuchMember":1}`))
			refuses(t, what+" answer", resp, errBody)
		}
	}
}

// refuses checks that schema s refuses b.
func refuses(t *testing.T, what string, s *valschema.Schema, b []byte) {
	t.Helper()
	v, err := valschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if s.Validate(v) == nil {
		t.Fatalf("%s: the published schema accepts %s", what, b)
	}
}
