package ui_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/harness/inproc"
	"github.com/baton-rt/baton/wire"
)

// adminToken is the ingress's admin token, the one the tests sign in with.
const adminToken = "admin-t"

// world is the system under test: an embedded nats-server with the
// topology, an in-process owner of the demo agent per deployment (agent
// "default") and v1's ingress with the inspector on, admin routes and
// stream tokens (insecure-dev: no user token).
type world struct {
	*harness.World
	t      *testing.T
	client harness.Client
}

func newWorld(t *testing.T, deployments ...string) *world {
	t.Helper()
	findBrowser(t) // no browser: fail (skip with -short) before starting anything
	hw := harness.NewWorld(t, wait, harness.WithIngress(func(c *ingress.Config) {
		c.UI = true
		c.AdminTokens = []string{adminToken}
		c.StreamTokenKeys = [][]byte{[]byte(strings.Repeat("k", 32))}
	}))
	for _, dep := range deployments {
		inproc.Run(t, hw.Env, dep, "owner-"+dep)
	}
	return &world{World: hw, t: t, client: harness.Client{HTTP: &http.Client{Timeout: 30 * time.Second}}}
}

// base is the URL of v1's ingress, the one the browser talks to.
func (w *world) base() string { return w.Ingress("v1").URL() }

// api sends body to path on v1's ingress (an admin route with the admin
// token), wants status want and decodes the answer into out (nil: not).
func (w *world) api(method, path string, body any, want int, out any) {
	w.t.Helper()
	var opts []harness.Option
	if strings.HasPrefix(path, "/v1/admin/") {
		opts = append(opts, harness.Bearer(adminToken))
	}
	if err := w.client.Call(w.t.Context(), method, w.base()+path, body, want, out, opts...); err != nil {
		w.t.Fatalf("%s %s: %v", method, path, err)
	}
}

// newSession is the body of POST /v1/sessions.
type newSession struct {
	Alias string            `json:"alias,omitempty"`
	Tags  map[string]string `json:"tags,omitempty"`
	Text  string            `json:"text,omitempty"`
}

// create starts a session on v1 and returns its ID.
func (w *world) create(s newSession) string {
	w.t.Helper()
	var c ingress.Created
	w.api(http.MethodPost, "/v1/sessions", s, http.StatusCreated, &c)
	return c.SessionID
}

// status is what the tests read of GET /v1/sessions/{id}.
type status struct {
	State        string `json:"state"`
	DeploymentID string `json:"deploymentId"`
	Epoch        uint64 `json:"epoch"`
	WaitingFor   []struct {
		Kind      string `json:"kind"`
		RequestID string `json:"requestId"`
	} `json:"waitingFor"`
}

// inputRequest is the request ID of the input session id waits for.
func (s status) inputRequest() string {
	for _, wf := range s.WaitingFor {
		if wf.Kind == "input" {
			return wf.RequestID
		}
	}
	return ""
}

// statusUntil polls session id's status until cond holds and returns it.
func (w *world) statusUntil(id, what string, cond func(status) bool) status {
	w.t.Helper()
	var st status
	w.T.Eventually(wait, id+" "+what, func() bool {
		st = status{}
		w.api(http.MethodGet, "/v1/sessions/"+id, nil, http.StatusOK, &st)
		return cond(st)
	})
	return st
}

// waitingInput waits until session id waits for input and returns the
// request's ID.
func (w *world) waitingInput(id string) string {
	w.t.Helper()
	st := w.statusUntil(id, "waits for input", func(s status) bool { return s.inputRequest() != "" })
	return st.inputRequest()
}

// listed waits until the admin listing with query (the session index)
// holds exactly the sessions want, in any order.
func (w *world) listed(query string, want ...string) {
	w.t.Helper()
	want = slices.Sorted(slices.Values(want))
	var got []string
	err := harness.Poll(w.t.Context(), wait, func() bool {
		var page struct {
			Sessions []struct {
				SessionID string `json:"sessionId"`
			} `json:"sessions"`
		}
		w.api(http.MethodGet, "/v1/admin/sessions"+query, nil, http.StatusOK, &page)
		got = got[:0]
		for _, s := range page.Sessions {
			got = append(got, s.SessionID)
		}
		slices.Sort(got)
		return slices.Equal(got, want)
	})
	if err != nil {
		w.t.Fatalf("GET /v1/admin/sessions%s: %v, want %v (index not caught up?)", query, got, want)
	}
}

// notIdle waits until the drain report lists session id under dep as not
// idle, with why.
func (w *world) notIdle(dep, id, why string) {
	w.t.Helper()
	w.T.Eventually(wait, "the drain report lists "+id+" as not idle ("+why+")", func() bool {
		var r struct {
			Deployments []struct {
				DeploymentID string `json:"deploymentId"`
				NotIdle      []struct {
					SessionID string `json:"sessionId"`
					Why       string `json:"why"`
				} `json:"notIdle"`
			} `json:"deployments"`
		}
		w.api(http.MethodGet, "/v1/admin/deployments", nil, http.StatusOK, &r)
		for _, d := range r.Deployments {
			for _, n := range d.NotIdle {
				if d.DeploymentID == dep && n.SessionID == id && n.Why == why {
					return true
				}
			}
		}
		return false
	})
}

// stamps waits until v1's ingress stamps dep (it follows a promotion by
// a KV watch).
func (w *world) stamps(dep string) {
	w.t.Helper()
	w.T.Eventually(wait, "v1's ingress stamps "+dep, func() bool {
		var info ingress.IngressInfo
		w.api(http.MethodGet, "/v1/ingress", nil, http.StatusOK, &info)
		return info.Stamps == dep
	})
}

// eventsUntil polls session id's committed events until cond holds and
// returns them.
func (w *world) eventsUntil(id, what string, cond func([]wire.Event) bool) []wire.Event {
	w.t.Helper()
	var evs []wire.Event
	w.T.Eventually(wait, id+": "+what, func() bool {
		evs = w.Events("v1", id)
		return cond(evs)
	})
	return evs
}

// took logs how long test t took since began; defer it first.
func took(t *testing.T, began time.Time) {
	t.Logf("took %s", time.Since(began).Round(time.Millisecond))
}
