package wire

import "reflect"

// Capability is what a consumer can decode: the owner stamps it on its hook
// record, and a producer encodes for it. A v1 consumer and a future v2
// consumer can live side by side, each receiving its own version.
type Capability struct {
	V int `json:"v"`
}

// Current returns the capability of this build.
func Current() Capability { return Capability{V: CurrentVersion} }

// encoders maps each producible version to its encoder. Version 0 is never
// produced. encodeV5 writes the current shape; encodeV4, encodeV3,
// encodeV2 and encodeV1 are down-conversions of it for consumers still
// stamped {v:4}, {v:3}, {v:2} or {v:1}, refusing what their version cannot
// express (ErrUnsupportedTarget).
var encoders = map[int]func(Command) ([]byte, error){
	1: encodeV1,
	2: encodeV2,
	3: encodeV3,
	4: encodeV4,
	5: encodeV5,
}

// Encode encodes c for a consumer with the given capability. The complete
// value is normalized, checked and validated against the version's schema
// once; nothing invalid leaves the producer. Errors are *Error.
func Encode(target Capability, c Command) ([]byte, error) {
	enc, ok := encoders[target.V]
	if !ok {
		e := c.fail(ErrUnsupportedTarget, "this build produces versions 1..%d", CurrentVersion)
		e.Version = target.V
		return nil, e
	}
	return enc(c)
}

// Decode is the only consumer-side interpretation of an inbox payload. It
// runs the migration chain of the default registry to the current version,
// validates the result against the current shape and rules, and returns
// the normalized command. An unknown newer version, an unknown kind or an
// invalid value is a *Error (errors.Is with ErrUnknownVersion,
// ErrUnknownKind, ErrInvalid, ErrTooLarge).
//
// A current-version document takes the typed path (typed.go): strict
// decode into Command plus the Go rules, which are held to the frozen
// schema by tests. A version-0 document is lifted through the migration
// chain and its result takes the same typed path. Whatever the typed path
// does not accept is decided by the reference path, which also produces the
// typed error.
func Decode(b []byte) (Command, error) {
	if len(b) > MaxCommandBytes {
		return Command{}, reject(ErrTooLarge, "%d bytes, limit %d", len(b), MaxCommandBytes)
	}
	if c, v := decodeFast(b); v == accepted {
		return debugCheckDecoded(c, b)
	}
	return decodeLifted(b, true)
}

// decodeReference is Decode without the typed path: generic parse,
// migration chain, the compiled schema, strict decode and the Go rules.
// It is the reference the typed path is tested against (equivalence_test.go)
// and decides whatever the typed path does not accept.
func decodeReference(b []byte) (Command, error) {
	if len(b) > MaxCommandBytes {
		return Command{}, reject(ErrTooLarge, "%d bytes, limit %d", len(b), MaxCommandBytes)
	}
	return decodeLifted(b, false)
}

// decodeLifted parses b generically and lifts it to the current version.
// With fast set, a migrated document is decided by the typed path when it
// accepts it; the reference checks decide everything else.
func decodeLifted(b []byte, fast bool) (Command, error) {
	doc, err := parseObject(b)
	if err != nil {
		return Command{}, reject(ErrInvalid, "%v", err)
	}
	cur, from, err := defaultRegistry.lift(doc)
	if err != nil {
		return Command{}, err
	}
	asIs := from == CurrentVersion || liftedAsIs(doc, cur)
	if fast && !asIs {
		if c, raw, ok := decodeMigrated(cur); ok {
			return debugCheckDecoded(c, raw)
		}
	}
	c, err := decodeCurrent(cur, b, asIs)
	if err != nil {
		return Command{}, annotate(err, cur, from)
	}
	return c, nil
}

// decodeMigrated is the typed path of an older document, lifted through
// the migration chain in its generic form (cur): re-encoded and read by
// decodeFast. It reports ok only when that accepts; the reference checks
// decide the rest.
func decodeMigrated(cur map[string]any) (Command, []byte, bool) {
	raw, err := marshal(cur)
	if err != nil {
		return Command{}, nil, false
	}
	c, v := decodeFast(raw)
	return c, raw, v == accepted
}

// liftedAsIs reports whether the migration chain only restamped the
// version of doc (a version-1 to version-4 document: the later versions
// only added). The
// original bytes then stand for the lifted document, so raw JSON in it
// keeps its member order, as the typed path keeps it.
func liftedAsIs(doc, cur map[string]any) bool {
	if len(doc) != len(cur) {
		return false
	}
	for k, v := range doc {
		if w, ok := cur[k]; !ok || k != "v" && !reflect.DeepEqual(v, w) {
			return false
		}
	}
	return true
}

// decodeCurrent turns a document at the current version into a Command.
// When asIs (nothing was migrated, or the migration only restamped the
// version) the original bytes b are decoded directly.
func decodeCurrent(doc map[string]any, b []byte, asIs bool) (Command, error) {
	kind, isString := doc["kind"].(string)
	switch {
	case !isString:
		return Command{}, reject(ErrInvalid, "kind must be a string, got %v", doc["kind"])
	case !Kind(kind).Valid():
		return Command{}, reject(ErrUnknownKind, "kind %q", kind)
	}
	if err := commandCurrent().check(doc); err != nil {
		return Command{}, reject(ErrInvalid, "%v", err)
	}
	if !asIs {
		var err error
		if b, err = marshal(doc); err != nil {
			return Command{}, reject(ErrInvalid, "%v", err)
		}
	}
	var c Command
	if err := unmarshalStrict(b, &c); err != nil {
		return Command{}, reject(ErrInvalid, "%v", err)
	}
	c.V = CurrentVersion
	c = normalizeCommand(c)
	if err := c.validate(); err != nil {
		return Command{}, err
	}
	return c, nil
}
