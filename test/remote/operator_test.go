package remote_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
)

// The documented operator user (docs/api.md, "Operators over NATS") lists
// sessions on baton.admin.sessions and is refused the ingress's channel
// subjects and the inbox.
func TestOperatorPermissions(t *testing.T) {
	t.Parallel()
	srv := permServer(t, map[string]string{"OPS_PASSWORD": "ops-pw"},
		"    { user: owner, password: owner-pw }", docUsers(t, "operator"))
	e := newPermEnv(t, userURL(srv, "owner", "owner-pw"))
	ops := e.connect(userURL(srv, "ops", "ops-pw"), "")
	var list ingress.SessionList
	e.h.Eventually(permWait, "a listing as the operator", func() bool {
		msg, err := ops.nc.Request("baton.admin.sessions", []byte(`{"limit":5}`), 5*time.Second)
		return err == nil && msg.Header.Get("Nats-Service-Error-Code") == "" && json.Unmarshal(msg.Data, &list) == nil
	})
	if list.Sessions == nil {
		t.Fatalf("listing: %+v", list)
	}
	e.h.Check(ops.nc.Publish("baton.ingress.default.create", []byte(`{"text":"x"}`)))
	ops.refused(e, `Publish to "baton.ingress.default.create"`)
	e.h.Check(ops.nc.Publish("baton.inbox.x", nil))
	ops.refused(e, `Publish to "baton.inbox.x"`)
}
