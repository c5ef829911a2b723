package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// CurrentVersion is the inbox wire version this build produces and decodes
// to. It equals the highest version of the default registry (tested).
const CurrentVersion = 5

// Migration lifts one decoded command document from version n-1 to version
// n. It is a pure data transform over the generic JSON form (objects as
// map[string]any, numbers as json.Number): no I/O, no clock, no encoder
// policy. It must stamp "v": n on its result and may not mutate its input.
// An error should wrap ErrInvalid or ErrUnknownKind (or be a *Error).
type Migration func(doc map[string]any) (map[string]any, error)

// Registry is the explicit, contiguous list of inbox wire versions: version
// n is known through the migration that lifts n-1 to n, starting from the
// unversioned era (0). Its highest version is the one Decode produces.
type Registry struct {
	ups []Migration // ups[i] lifts version i to i+1
}

// NewRegistry returns an empty registry (current version 0).
func NewRegistry() *Registry { return &Registry{} }

// defaultRegistry holds the shipped versions.
var defaultRegistry = func() *Registry {
	r := NewRegistry()
	if err := errors.Join(r.Register(1, migrateV0), r.Register(2, migrateV1), r.Register(3, migrateV2),
		r.Register(4, migrateV3), r.Register(5, migrateV4)); err != nil {
		panic(err)
	}
	return r
}()

// DefaultRegistry returns a copy of the shipped registry; extending the copy
// (as the version-bump test does) leaves Decode unchanged.
func DefaultRegistry() *Registry {
	return &Registry{ups: append([]Migration(nil), defaultRegistry.ups...)}
}

// Register adds version v through the migration from v-1. Versions are
// registered in order: v must be Current()+1.
func (r *Registry) Register(v int, up Migration) error {
	if v != r.Current()+1 || up == nil {
		return fmt.Errorf("%w: version %d after %d (versions are contiguous from 1)", ErrRegistry, v, r.Current())
	}
	r.ups = append(r.ups, up)
	return nil
}

// Current returns the highest registered version.
func (r *Registry) Current() int { return len(r.ups) }

// Versions lists the registered versions, 1..Current.
func (r *Registry) Versions() []int {
	out := make([]int, r.Current())
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// Upgrade parses an encoded command and lifts it to the registry's current
// version. It returns the lifted document and the version it was written at.
// An unknown (newer) version is ErrUnknownVersion; a payload that declares a
// version is never interpreted as an unversioned one.
func (r *Registry) Upgrade(b []byte) (map[string]any, int, error) {
	doc, err := parseObject(b)
	if err != nil {
		return nil, 0, reject(ErrInvalid, "%v", err)
	}
	return r.lift(doc)
}

func (r *Registry) lift(doc map[string]any) (map[string]any, int, error) {
	from, err := versionOf(doc)
	if err != nil {
		return nil, 0, annotate(err, doc, 0)
	}
	if from > r.Current() {
		return nil, from, annotate(reject(ErrUnknownVersion, "newest known version is %d", r.Current()), doc, from)
	}
	for v := from; v < r.Current(); v++ {
		next, err := r.ups[v](doc)
		if err != nil {
			return nil, from, annotate(err, doc, from)
		}
		if got, _ := versionOf(next); got != v+1 {
			return nil, from, annotate(reject(ErrInvalid, "migration %d→%d stamped v=%d", v, v+1, got), doc, from)
		}
		doc = next
	}
	return doc, from, nil
}

// versionOf reads "v": absent means the unversioned era (0); otherwise it
// must be a positive integer.
func versionOf(doc map[string]any) (int, error) {
	raw, ok := doc["v"]
	if !ok {
		return 0, nil
	}
	n, isNum := raw.(json.Number)
	v, err := strconv.Atoi(string(n))
	if !isNum || err != nil || v < 1 {
		return 0, reject(ErrInvalid, "v must be a positive integer, got %v", raw)
	}
	return v, nil
}

// annotate turns err into a *Error carrying the declared version and, when
// readable, the kind and command ID.
func annotate(err error, doc map[string]any, version int) *Error {
	e := *asError(err)
	e.Version = version
	if e.Kind == "" {
		e.Kind, _ = doc["kind"].(string)
	}
	if e.CommandID == "" {
		e.CommandID, _ = doc["id"].(string)
	}
	return &e
}
