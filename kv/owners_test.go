package kv_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
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
		mustErr(t, err, record.ErrInvalid)
	}
	first, changed, err := st.RetireDeployment(c, a)
	if err != nil || !changed || !first.Retired || first.RetiredAt.IsZero() || first.ID != a {
		t.Fatalf("retire: %+v changed=%v %v", first, changed, err)
	}
	again, changed, err := st.RetireDeployment(c, a)
	if err != nil || changed || !again.RetiredAt.Equal(first.RetiredAt) {
		t.Fatalf("retire twice (idempotent, first retiredAt kept): %+v changed=%v %v", again, changed, err)
	}
	_, _, err = st.RetireDeployment(c, "latest")
	mustErr(t, err, record.ErrInvalid)
	_, err = st.DeploymentRetired(c, "a.b")
	mustErr(t, err, record.ErrInvalid)
	for id, want := range map[string]bool{a: true, b: false, uid("dep"): false} {
		if got, err := st.DeploymentRetired(c, id); err != nil || got != want {
			t.Fatalf("DeploymentRetired(%s) = %v %v, want %v", id, got, err, want)
		}
	}
	_, err = st.PutDeployment(c, kv.Deployment{ID: a}, rev)
	mustErr(t, err, record.ErrConflict)

	// The listing reads each record by direct get, a hint that may lag
	// behind on a cluster: poll. It is sorted by ID (uid's IDs are not
	// made in that order: their time part varies in width and wraps).
	eventually(t, func() error {
		list, err := st.ListDeployments(c)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(list, func(d kv.Deployment) bool { return d.ID == a })
		j := slices.IndexFunc(list, func(d kv.Deployment) bool { return d.ID == b })
		sorted := slices.IsSortedFunc(list, func(x, y kv.Deployment) int { return strings.Compare(x.ID, y.ID) })
		if i < 0 || j < 0 || !sorted || !list[i].Retired || list[i].RetiredAt.IsZero() || list[j].Retired {
			return fmt.Errorf("list: %+v", list)
		}
		return nil
	})
	// A deployment without a record is created retired (an operator may
	// retire one whose owners never advertised).
	fresh := uid("dep")
	if d, changed, err := st.RetireDeployment(c, fresh); err != nil || !changed || !d.Retired {
		t.Fatalf("retire an unrecorded deployment: %+v %v %v", d, changed, err)
	}
	// Concurrent retirements of one deployment (record missing, then
	// present): every call succeeds, exactly one changes the record.
	for _, pre := range []bool{false, true} {
		id := uid("dep")
		if pre {
			if _, err := st.PutDeployment(c, kv.Deployment{ID: id}, 0); err != nil {
				t.Fatal(err)
			}
		}
		const n = 4
		errs, changes := make(chan error, n), make(chan bool, n)
		for range n {
			go func() {
				_, ch, err := st.RetireDeployment(c, id)
				errs <- err
				changes <- ch
			}()
		}
		changedN := 0
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("concurrent retire (record present %v): %v", pre, err)
			}
			if <-changes {
				changedN++
			}
		}
		if changedN != 1 {
			t.Fatalf("concurrent retire (record present %v): %d calls changed the record, want 1", pre, changedN)
		}
	}
	eventually(t, func() error {
		ids, err := st.RetiredDeployments(c)
		if err == nil && (!slices.Contains(ids, a) || !slices.Contains(ids, fresh) || slices.Contains(ids, b)) {
			err = fmt.Errorf("retired deployments %v: want %s and %s, not %s", ids, a, fresh, b)
		}
		return err
	})
	// A direct get is a hint that may lag behind on a cluster: poll.
	eventually(t, func() error {
		d, _, err := st.GetDeployment(c, a)
		if err == nil && !d.Retired {
			err = fmt.Errorf("%s not retired yet: %+v", a, d)
		}
		return err
	})
	_, _, err = st.GetDeployment(c, uid("dep"))
	mustErr(t, err, record.ErrNotFound)
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
	mustErr(t, st.AddIndex(c, "p.1", "s"), record.ErrInvalid)
}

// Owners advertise the versions they read: the record is created when
// there is none, a retirement keeps the versions, a later advertisement
// keeps the retirement.
func testAdvertise(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	a := uid("dep")
	if _, err := st.DeploymentReads(c, a); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("reads of a deployment without a record: err = %v, want ErrNotFound", err)
	}
	if err := st.AdvertiseDeployment(c, a, []int{2, 1, 2}, []int{1, 2, 3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.DeploymentReads(c, a); err != nil || !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("reads = %v %v, want [1 2]", got, err)
	}
	retired, _, err := st.RetireDeployment(c, a)
	if err != nil || !slices.Equal(retired.WireVersions, []int{1, 2}) {
		t.Fatalf("retire: %+v %v (the versions must be kept)", retired, err)
	}
	if err := st.AdvertiseDeployment(c, a, []int{1}, []int{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	// A direct get is a hint that may lag behind on a cluster: poll.
	eventually(t, func() error {
		d, _, err := st.GetDeployment(c, a)
		if err == nil && (!d.Retired || !d.RetiredAt.Equal(retired.RetiredAt) ||
			!slices.Equal(d.WireVersions, []int{1}) || !slices.Equal(d.StateVersions, []int{1, 2, 3, 4})) {
			err = fmt.Errorf("after advertising again: %+v (want the retirement kept, the versions replaced)", d)
		}
		return err
	})
	if got, err := st.DeploymentReads(c, a); err != nil || !slices.Equal(got, []int{1}) {
		t.Fatalf("reads = %v %v, want [1]", got, err)
	}
	// Racing advertisers and a retirement: every one succeeds, the record
	// stays retired.
	errs := make(chan error, 4)
	for i := range 4 {
		other := open(t, i)
		go func() { errs <- other.AdvertiseDeployment(c, a, []int{1, i + 1}, nil) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, func() error {
		d, _, err := st.GetDeployment(c, a)
		if err == nil && (!d.Retired || len(d.WireVersions) != 2) {
			err = fmt.Errorf("after racing advertisers: %+v (want retired, one advertiser's versions)", d)
		}
		return err
	})
	err = st.AdvertiseDeployment(c, "latest", []int{1}, nil)
	mustErr(t, err, record.ErrInvalid)
	_, err = st.DeploymentReads(c, "a.b")
	mustErr(t, err, record.ErrInvalid)
}
