package wire

import "os"

// debugSchema, set by BATON_WIRE_SCHEMA_CHECK=1 in the environment, makes
// the codecs also validate what they accept or produce against the compiled
// JSON Schema, as they all did before the typed fast paths. It is a
// debugging aid: the Go rules are held to the schema by tests
// (equivalence_test.go), so production leaves it off.
var debugSchema = os.Getenv("BATON_WIRE_SCHEMA_CHECK") == "1"

// debugCheckDecoded validates the document a command was decoded from (b,
// at the current version) against the schema when debugSchema is set.
func debugCheckDecoded(c Command, b []byte) (Command, error) {
	if !debugSchema {
		return c, nil
	}
	if err := debugCheck(commandCurrent(), b); err != nil {
		return Command{}, c.fail(ErrInvalid, "schema (debug check): %v", err)
	}
	return c, nil
}

// debugCheck validates encoded JSON against a contract.
func debugCheck(k *contract, b []byte) error {
	doc, err := parseDoc(b)
	if err != nil {
		return err
	}
	return k.check(doc)
}
