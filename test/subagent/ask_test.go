package subagent

import (
	"net/http"
	"strings"
	"testing"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
)

// A child's /ask surfaces on its parent's stream as child.waiting with the
// child's requestId; while it waits, a v2 delivery does not hand the parent
// off (handoff.skipped reason child). The answer completes both turns, whether it goes to
// the child's own input route or to the parent's, which the ingress routes
// to the child that waits.
func TestChildAsks(t *testing.T) {
	t.Parallel()
	for _, route := range []string{"child", "parent"} {
		t.Run("answered through the "+route, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.owner("v1", "p1")
			w.owner("v2", "p2")
			in := harness.For(t).Ingress(w.URL, ingress.Config{Deployment: "v1", InsecureDev: true})
			parent := w.start("v1")
			kid := child(parent, "r", 1)

			w.Send(parent, stamped("spawn", "v1", "/spawn r /ask colour?"))
			evs := w.WaitKind(parent, wire.EventChildWaiting, 1)
			kevs := w.WaitKind(kid, wire.EventInputRequested, 1)
			req := harness.FirstData[wire.InputRequested](t, kevs, wire.EventInputRequested)
			cw := harness.FirstData[wire.ChildWaitingEvent](t, evs, wire.EventChildWaiting)
			if cw != (wire.ChildWaitingEvent{Handle: "r", ChildSessionID: kid, RequestID: req.RequestID, Question: "colour?"}) {
				t.Fatalf("child.waiting %+v, want r/%s waiting for %s (colour?)", cw, kid, req.RequestID)
			}
			if r := w.Record(parent).Record; r.State != "active" {
				t.Fatalf("parent state %s", r.State)
			}

			// Waiting for its child's answer, the parent is not idle: the
			// v2 delivery is judged when it arrives (and, like a delivery
			// during an input wait, applied once the wait is over).
			w.Send(parent, stamped("during", "v2", "during the wait"))

			var rc ingress.Receipt
			body := map[string]any{"requestId": req.RequestID, "value": "blue", "idempotencyKey": "answer-1"}
			c := harness.Client{}
			w.Check(c.Call(t.Context(), http.MethodPost, in.URL()+"/v1/sessions/"+w.answerTo(route, parent, kid)+"/input", body, http.StatusAccepted, &rc))
			if rc.SessionID != kid {
				t.Fatalf("answer receipt %+v names %s, want the child %s", rc, rc.SessionID, kid)
			}
			evs = w.WaitFor(parent, "the child's result after the answer", func(evs []wire.Event) bool {
				out := harness.Outputs(evs)
				return hasPrefix(out, "child r:") && harness.OutputCommitted("during the wait")(evs) && settled(evs)
			})
			kevs = w.WaitFor(kid, "the child's turn settled", settled)
			if sk := skips(t, evs); len(sk) != 1 || sk[0].Reason != wire.SkipChild || sk[0].CommandID != "during" || sk[0].TargetDeploymentID != "v2" {
				t.Fatalf("handoff.skipped %+v, want one, reason child, for the v2 delivery", sk)
			}
			if r := w.Record(parent).Record; r.DeploymentID != "v1" {
				t.Fatalf("parent moved to %s while its child waited", r.DeploymentID)
			}
			want := "child r: /ask colour?\ninput " + req.RequestID + `: "blue"`
			if n := count(harness.Outputs(evs), want); n != 1 {
				t.Fatalf("parent outputs %q, want %q once", harness.Outputs(evs), want)
			}
			if n := harness.Count(evs, wire.EventChildCompleted); n != 1 {
				t.Fatalf("%d child.completed", n)
			}
			if n := harness.Count(evs, wire.EventHandoffStarted); n != 0 {
				t.Fatalf("the parent moved while its child waited: %s", harness.Trace(evs))
			}
			if !strings.HasPrefix(harness.Outputs(kevs)[len(harness.Outputs(kevs))-1], "input "+req.RequestID) {
				t.Fatalf("child outputs %q", harness.Outputs(kevs))
			}
			if _, snap := w.checkpoint(parent); len(snap.ChildWaits) != 0 {
				t.Fatalf("parent still records child waits %+v", snap.ChildWaits)
			}
			w.check(parent, evs, "")
			w.check(kid, kevs, "")
		})
	}
}

// answerTo is the session whose input route the answer is posted to.
func (w *world) answerTo(route, parent, kid string) string {
	if route == "parent" {
		return parent
	}
	return kid
}
