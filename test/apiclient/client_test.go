package apiclient_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/harness/inproc"
	"github.com/baton-rt/baton/test/apiclient"
)

const wait = 60 * time.Second

// The client generated from docs/openapi.yaml, against a real owner and
// ingress: it creates a session with a first message, delivers another,
// reads the events as the document types them, reads the status, and
// gets a typed 404.
func TestGeneratedClientRoundTrip(t *testing.T) {
	t.Parallel()
	w := harness.NewWorld(t, wait)
	inproc.Run(t, w.Env, "v1", "p1")
	c, err := apiclient.NewClientWithResponses(w.Ingress("v1").URL())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	alias, first, second := "generated-client", "hello from the generated client", "and again"
	created, err := c.CreateSessionWithResponse(ctx, apiclient.CreateRequest{Alias: &alias, Text: &first})
	if err != nil || created.JSON201 == nil {
		t.Fatalf("create: %v %d %s", err, status(created.HTTPResponse), created.Body)
	}
	id := created.JSON201.SessionId
	delivered, err := c.DeliverWithResponse(ctx, apiclient.DeliveryRequest{Alias: &alias, Text: &second})
	if err != nil || delivered.JSON202 == nil || delivered.JSON202.SessionId != id {
		t.Fatalf("deliver: %v %d %s", err, status(delivered.HTTPResponse), delivered.Body)
	}

	var outputs []string
	w.T.Eventually(wait, "both outputs as typed events", func() bool {
		outputs = outputsOf(ctx, t, c, id)
		return len(outputs) == 2
	})
	if !slices.Equal(outputs, []string{first, second}) {
		t.Fatalf("outputs %q", outputs)
	}
	st, err := c.GetSessionWithResponse(ctx, id)
	if err != nil || st.JSON200 == nil || st.JSON200.SessionId != id || !slices.Contains(st.JSON200.Tokens, alias) {
		t.Fatalf("status: %v %d %s", err, status(st.HTTPResponse), st.Body)
	}
	missing, err := c.GetSessionWithResponse(ctx, "01JZZZZZZZZZZZZZZZZZZZZZZZ")
	if err != nil || missing.JSON404 == nil || missing.JSON404.Error.Code != "not_found" {
		t.Fatalf("unknown session: %v %d %s", err, status(missing.HTTPResponse), missing.Body)
	}
}

// outputsOf reads the session's events with follow=false and returns the
// message.output texts.
func outputsOf(ctx context.Context, t *testing.T, c *apiclient.ClientWithResponses, id string) []string {
	t.Helper()
	follow := apiclient.GetEventsParamsFollowFalse
	evs, err := c.GetEventsWithResponse(ctx, id, &apiclient.GetEventsParams{Follow: &follow})
	if err != nil || evs.JSON200 == nil {
		t.Fatalf("events: %v %d %s", err, status(evs.HTTPResponse), evs.Body)
	}
	var out []string
	for i, ev := range *evs.JSON200 {
		if ev.Seq != i+1 {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
		if text, ok := ev.Data["text"].(string); ok && ev.Kind == "message.output" {
			out = append(out, text)
		}
	}
	return out
}

func status(r *http.Response) int {
	if r == nil {
		return 0
	}
	return r.StatusCode
}
