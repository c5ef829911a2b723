package driver

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/baton-rt/baton/wire"
)

// TestInputMatchesOldConversion (temporary, until the conversion goes):
// wire's DecodeInput gives what decodeCommand and toTurnInput gave, for
// every frozen v1 fixture and for undecodable payloads.
func TestInputMatchesOldConversion(t *testing.T) {
	paths, _ := filepath.Glob("../../wire/testdata/v1/*.json")
	payloads := [][]byte{[]byte(`{`), []byte(`{"v":99,"kind":"deliver","id":"c-new"}`)}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, b)
	}
	for i, b := range payloads {
		seq := uint64(10 + i)
		old, got := decodeCommand(seq, b), wire.DecodeInput(seq, b)
		force := got.Force
		got.Force = false
		if want := toTurnInput(old); !reflect.DeepEqual(got, want) || force != old.Force {
			t.Errorf("%s:\n got %+v\nwant %+v", b, got, want)
		}
	}
}
