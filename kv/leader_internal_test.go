package kv

import (
	"errors"
	"testing"

	"github.com/baton-rt/baton/record"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
)

func TestAPIPrefixOf(t *testing.T) {
	for _, c := range []struct {
		opts jetstream.JetStreamOptions
		want string
	}{
		{jetstream.JetStreamOptions{}, "$JS.API."},
		{jetstream.JetStreamOptions{APIPrefix: "JS.hub.API"}, "JS.hub.API."},
		{jetstream.JetStreamOptions{APIPrefix: "JS.hub.API."}, "JS.hub.API."},
		{jetstream.JetStreamOptions{Domain: "hub"}, "$JS.hub.API."},
	} {
		if got := msgGetSubject(apiPrefix(c.opts), "S"); got != c.want+"STREAM.MSG.GET.S" {
			t.Errorf("%+v: %s", c.opts, got)
		}
	}
}

// TestParseMsgGet: which answers are final and which are sent again.
func TestParseMsgGet(t *testing.T) {
	for _, c := range []struct {
		name      string
		body      string
		permanent bool
		is        error
	}{
		{"not found", `{"error":{"code":404,"err_code":10037,"description":"no message found"}}`, true, record.ErrNotFound},
		{"no leader yet", `{"error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}`, false, nil},
		{"stream not found", `{"error":{"code":404,"err_code":10059,"description":"stream not found"}}`, true, jetstream.ErrStreamNotFound},
		{"no message", `{}`, true, nil},
		{"not JSON", `nope`, true, nil},
	} {
		m, err := parseMsgGet([]byte(c.body))
		var perm *backoff.PermanentError
		if m != nil || err == nil || errors.As(err, &perm) != c.permanent || c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %+v %v", c.name, m, err)
		}
	}
	m, err := parseMsgGet([]byte(`{"message":{"subject":"s.a","seq":7,"hdrs":"TkFUUy8xLjANCkJhdG9uLUV2ZW50LVNlcTogMw0KDQo=","data":"eA=="}}`))
	if err != nil || m.Sequence != 7 || m.Subject != "s.a" || string(m.Data) != "x" || m.Header.Get("Baton-Event-Seq") != "3" {
		t.Fatalf("message: %+v %v", m, err)
	}
}
