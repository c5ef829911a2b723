package wire

// Capability is what a consumer can decode: the owner stamps it on its hook
// record, and a producer encodes for it. A v1 consumer and a future v2
// consumer can live side by side, each receiving its own version.
type Capability struct {
	V int `json:"v"`
}

// Current returns the capability of this build.
func Current() Capability { return Capability{V: CurrentVersion} }

// encoders maps each producible version to its encoder. Version 0 is never
// produced. When version 2 ships, encodeV2 joins and encodeV1 becomes a
// down-conversion of the v2 Go type for consumers still stamped {v:1}.
var encoders = map[int]func(Command) ([]byte, error){
	1: encodeV1,
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
// validates the result against the current schema and rules, and returns
// the normalized command. An unknown newer version, an unknown kind or an
// invalid value is a *Error (errors.Is with ErrUnknownVersion,
// ErrUnknownKind, ErrInvalid, ErrTooLarge).
func Decode(b []byte) (Command, error) {
	if len(b) > MaxCommandBytes {
		return Command{}, reject(ErrTooLarge, "%d bytes, limit %d", len(b), MaxCommandBytes)
	}
	doc, err := parseObject(b)
	if err != nil {
		return Command{}, reject(ErrInvalid, "%v", err)
	}
	cur, from, err := defaultRegistry.lift(doc)
	if err != nil {
		return Command{}, err
	}
	c, err := decodeCurrent(cur, b, from)
	if err != nil {
		return Command{}, annotate(err, cur, from)
	}
	return c, nil
}

// decodeCurrent turns a document at the current version into a Command.
// When nothing was migrated the original bytes are decoded directly.
func decodeCurrent(doc map[string]any, b []byte, from int) (Command, error) {
	kind, isString := doc["kind"].(string)
	switch {
	case !isString:
		return Command{}, reject(ErrInvalid, "kind must be a string, got %v", doc["kind"])
	case !Kind(kind).Valid():
		return Command{}, reject(ErrUnknownKind, "kind %q", kind)
	}
	if err := commandV1().check(doc); err != nil {
		return Command{}, reject(ErrInvalid, "%v", err)
	}
	if from != CurrentVersion {
		var err error
		if b, err = marshal(doc); err != nil {
			return Command{}, reject(ErrInvalid, "%v", err)
		}
	}
	var c Command
	if err := unmarshalStrict(b, &c); err != nil {
		return Command{}, reject(ErrInvalid, "%v", err)
	}
	c = normalizeCommand(c)
	if err := c.validate(); err != nil {
		return Command{}, err
	}
	return c, nil
}
