package kv_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/baton-rt/baton/kv"
)

func testDeployments(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	a, b := uid("dep"), uid("dep")
	rev, err := st.PutDeployment(c, kv.Deployment{ID: a}, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.PutDeployment(c, kv.Deployment{ID: a}, 0)
	mustOwned(t, err)
	if _, err := st.PutDeployment(c, kv.Deployment{ID: b}, 0); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"latest", "Latest", "", "a.b"} {
		_, err := st.PutDeployment(c, kv.Deployment{ID: id}, 0)
		mustErr(t, err, kv.ErrInvalid)
	}
	if err := st.RetireDeployment(c, a); err != nil {
		t.Fatal(err)
	}
	if err := st.RetireDeployment(c, a); err != nil {
		t.Fatalf("retire twice: %v", err)
	}
	mustErr(t, st.RetireDeployment(c, uid("dep")), kv.ErrNotFound)
	mustErr(t, st.RetireDeployment(c, "latest"), kv.ErrInvalid)
	_, err = st.PutDeployment(c, kv.Deployment{ID: a}, rev)
	mustErr(t, err, kv.ErrConflict)

	list, err := st.ListDeployments(c)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(d kv.Deployment) bool { return d.ID == a })
	j := slices.IndexFunc(list, func(d kv.Deployment) bool { return d.ID == b })
	if i < 0 || j < 0 || i > j || !list[i].Retired || list[i].RetiredAt.IsZero() || list[j].Retired {
		t.Fatalf("list: %+v", list)
	}
	// A direct get is a hint that may lag behind on a cluster: poll.
	eventually(t, func() error {
		d, _, err := st.GetDeployment(c, a)
		if err == nil && !d.Retired {
			err = fmt.Errorf("%s not retired yet: %+v", a, d)
		}
		return err
	})
	_, _, err = st.GetDeployment(c, uid("dep"))
	mustErr(t, err, kv.ErrNotFound)
}

func testIndex(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	p, other := uid("proc"), uid("proc")
	ids := []string{"s-c", "s-a", "s-b"}
	for _, id := range ids {
		if err := st.AddIndex(c, p, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AddIndex(c, p, "s-a"); err != nil {
		t.Fatalf("add twice: %v", err)
	}
	if err := st.AddIndex(c, other, "s-z"); err != nil {
		t.Fatal(err)
	}
	list := func(pid string) []string {
		t.Helper()
		got, err := st.ListIndex(c, pid)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// A listing is a watcher on the bucket: on a loaded cluster it may trail
	// the writes briefly, so each expectation is polled with a deadline.
	expect := func(pid string, want []string) {
		t.Helper()
		eventually(t, func() error {
			if got := list(pid); !slices.Equal(got, want) {
				return fmt.Errorf("index of %s: %v, want %v", pid, got, want)
			}
			return nil
		})
	}
	expect(p, []string{"s-a", "s-b", "s-c"})
	if err := st.RemoveIndex(c, p, "s-b"); err != nil {
		t.Fatal(err)
	}
	if err := st.RemoveIndex(c, p, "never"); err != nil {
		t.Fatalf("remove a missing entry: %v", err)
	}
	expect(p, []string{"s-a", "s-c"})
	expect(other, []string{"s-z"})
	if got := list(uid("proc")); len(got) != 0 {
		t.Fatalf("empty index: %v", got)
	}
	mustErr(t, st.AddIndex(c, "p.1", "s"), kv.ErrInvalid)
}
