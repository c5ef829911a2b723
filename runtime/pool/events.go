package pool

import (
	"encoding/json"
	"fmt"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"github.com/invopop/jsonschema"
)

// HeaderEventSeq is wire.HeaderEventSeq, under the name the appender uses.
const HeaderEventSeq = wire.HeaderEventSeq

// agentEvents is the default event registry (Config.Events nil): the
// built-in kinds plus each of the agent's kinds with any JSON object as its
// data. An agent that wants its data checked against a type registers its
// kinds itself and passes Config.Events.
func agentEvents(a runtime.Agent) (*wire.EventRegistry, error) {
	reg := wire.DefaultEvents()
	for _, k := range a.EventKinds() {
		if err := wire.RegisterEvent[agentData](reg, k, nil); err != nil {
			return nil, fmt.Errorf("pool: agent event kind %q: %w", k, err)
		}
	}
	return reg, nil
}

// agentData is the data type of a default-registered agent kind: any JSON
// object. (wire.RegisterEvent needs a struct; its schema says "object".)
type agentData struct{}

// JSONSchema implements the schema generator's override: any object.
func (agentData) JSONSchema() *jsonschema.Schema { return &jsonschema.Schema{Type: "object"} }

// UnmarshalJSON accepts any JSON object.
func (*agentData) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m)
}
