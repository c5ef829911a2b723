package wire

import (
	"reflect"
	"testing"
)

// TestEventBodyKinds: the data type of every built-in kind and data
// version is an EventBody naming that kind.
func TestEventBodyKinds(t *testing.T) {
	reg := DefaultEvents()
	for _, kind := range reg.Kinds() {
		for v := 1; v <= reg.Version(kind); v++ {
			typ := reg.specV(kind, v).typ
			b, ok := reflect.New(typ).Elem().Interface().(EventBody)
			switch {
			case !ok:
				t.Errorf("%s v%d: %s is not an EventBody", kind, v, typ)
			case b.EventKind() != kind:
				t.Errorf("%s v%d: %s names kind %q", kind, v, typ, b.EventKind())
			}
		}
	}
}
