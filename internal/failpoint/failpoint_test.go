package failpoint_test

import (
	"errors"
	"testing"

	"github.com/baton-rt/baton/internal/failpoint"
)

// A nil registry arms nothing; an armed point runs its action with the
// point's arguments and returns its error; Hit, Run and the helpers read it
// as the points do; a disarmed point and an unset value are silent.
func TestRegistry(t *testing.T) {
	var none *failpoint.Registry
	if none.Eval(failpoint.AfterCommit, failpoint.Args{}) != nil || none.Hit(failpoint.DropCommit, failpoint.Args{}) || none.Value(failpoint.ReadStateVersion) != 0 {
		t.Fatal("a nil registry injected a fault")
	}
	none.Run(failpoint.AfterCommit, failpoint.Args{})

	boom := errors.New("boom")
	var got failpoint.Args
	r := failpoint.New().
		On(failpoint.AfterConsumer, func(a failpoint.Args) error { got = a; return boom }).
		On(failpoint.DropCommit, failpoint.When(func(a failpoint.Args) bool { return a.SessionID == "S1" })).
		On(failpoint.HoldLeaseRenewal, failpoint.If(func() bool { return true })).
		Set(failpoint.ReadStateVersion, 4)
	if err := r.Eval(failpoint.AfterConsumer, failpoint.Args{SessionID: "S1", Detail: "recover"}); err != boom || got.SessionID != "S1" || got.Detail != "recover" {
		t.Fatalf("eval = %v with %+v", err, got)
	}
	if !r.Hit(failpoint.DropCommit, failpoint.Args{SessionID: "S1"}) || r.Hit(failpoint.DropCommit, failpoint.Args{SessionID: "S2"}) {
		t.Fatal("When did not decide by the arguments")
	}
	if !r.Hit(failpoint.HoldLeaseRenewal, failpoint.Args{}) || !errors.Is(r.Eval(failpoint.HoldLeaseRenewal, failpoint.Args{}), failpoint.Injected) {
		t.Fatal("If did not inject")
	}
	if r.Hit(failpoint.AfterCommit, failpoint.Args{}) || r.Value(failpoint.ReadStateVersion) != 4 || r.Value(failpoint.Name("unset")) != 0 {
		t.Fatal("an unarmed point or a value")
	}
	ran := 0
	r.On(failpoint.AfterCommit, failpoint.Do(func(failpoint.Args) { ran++ }))
	r.Run(failpoint.AfterCommit, failpoint.Args{})
	if ran != 1 || r.Hit(failpoint.AfterCommit, failpoint.Args{}) {
		t.Fatalf("Do ran %d times, or injected", ran)
	}
	r.On(failpoint.AfterConsumer, nil)
	if r.Eval(failpoint.AfterConsumer, failpoint.Args{}) != nil {
		t.Fatal("a disarmed point still ran")
	}
}
