package agents

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// requestTimeout bounds one NATS request to an ingress.
const requestTimeout = 30 * time.Second

// transcript sends a test's NATS requests and logs each request/response
// pair readably (subject, request body, the answer's headers and body);
// HTTP exchanges and plain publishes are logged alongside, numbered in one
// sequence. Quiet ones are sent but not logged (bulk traffic).
type transcript struct {
	t  *testing.T
	nc *nats.Conn
	mu sync.Mutex
	n  int
}

func (w *world) transcript() *transcript { return &transcript{t: w.t, nc: w.NC} }

// next is the number of the next logged exchange.
func (tr *transcript) next() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.n++
	return tr.n
}

// request sends body (JSON) to subject and returns the answer, logging the
// pair unless quiet.
func (tr *transcript) request(subject string, body any, quiet bool) (*nats.Msg, error) {
	tr.t.Helper()
	data := mustJSON(body)
	msg, err := tr.nc.Request(subject, data, requestTimeout)
	if !quiet {
		tr.t.Logf("#%d NATS request %s\n    → %s\n%s", tr.next(), subject, data, answer(msg, err))
	}
	return msg, err
}

// published logs a plain publish (no answer).
func (tr *transcript) published(subject string, data []byte, note string) {
	tr.t.Helper()
	tr.t.Logf("#%d NATS publish %s (%s)\n    → %s", tr.next(), subject, note, data)
}

// http logs an HTTP exchange.
func (tr *transcript) http(method, url string, body any, code int, resp []byte) {
	tr.t.Helper()
	req := ""
	if body != nil {
		req = "\n    → " + string(mustJSON(body))
	}
	tr.t.Logf("#%d HTTP %s %s%s\n    ← %d %s", tr.next(), method, url, req, code, strings.TrimSpace(string(resp)))
}

// note logs what the test observed next to the exchanges.
func (tr *transcript) note(format string, args ...any) {
	tr.t.Helper()
	tr.t.Logf("#%d observed: %s", tr.next(), fmt.Sprintf(format, args...))
}

// answer renders a NATS answer: its headers, sorted, then its body.
func answer(msg *nats.Msg, err error) string {
	if err != nil {
		return "    ← error: " + err.Error()
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(msg.Header)) {
		fmt.Fprintf(&b, "    ← header %s: %s\n", k, strings.Join(msg.Header[k], ", "))
	}
	fmt.Fprintf(&b, "    ← %s", msg.Data)
	return b.String()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// receipt decodes an accepted command's answer over NATS; a refusal (the
// service error headers) is an error naming its code and body.
func receipt(msg *nats.Msg, err error) (ingress.Receipt, error) {
	if err != nil {
		return ingress.Receipt{}, err
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return ingress.Receipt{}, fmt.Errorf("refused %s: %s", code, msg.Data)
	}
	var r ingress.Receipt
	if err := json.Unmarshal(msg.Data, &r); err != nil || r.Seq == 0 {
		return r, fmt.Errorf("receipt %s: %v", msg.Data, err)
	}
	return r, nil
}

// subscribers lists the server's subscriptions a message published to
// the literal subject would reach.
func (w *world) subscribers(subject string) []server.SubDetail {
	w.t.Helper()
	sz, err := w.srv.NATS().Subsz(&server.SubszOptions{Subscriptions: true, Test: subject, Limit: 10_000})
	w.h.Check(err)
	return sz.Subs
}

// queueGroups maps each queue group (or "" for none) of subject's
// subscribers to how many there are.
func (w *world) queueGroups(subject string) map[string]int {
	w.t.Helper()
	out := map[string]int{}
	for _, s := range w.subscribers(subject) {
		out[s.Queue]++
	}
	return out
}

// monitor sends a micro monitoring request ($SRV.<verb>.<service>) and
// collects one answer from every instance of the service: as many as the
// server has subscribers on that subject (so "every" is exact, without
// waiting for a quiet period). Each answer is logged through tr if given.
func (w *world) monitor(tr *transcript, verb, service string) [][]byte {
	w.t.Helper()
	subject := "$SRV." + verb + "." + service
	want := len(w.subscribers(subject))
	inbox := nats.NewInbox()
	sub, err := w.NC.SubscribeSync(inbox)
	w.h.Check(err)
	defer func() { _ = sub.Unsubscribe() }()
	w.h.Check(w.NC.PublishRequest(subject, inbox, nil))
	var out [][]byte
	deadline := time.Now().Add(wait)
	for len(out) < want && time.Now().Before(deadline) {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			break
		}
		out = append(out, m.Data)
	}
	if len(out) != want {
		w.t.Fatalf("%s: %d answers, want %d (one per subscriber)", subject, len(out), want)
	}
	if tr != nil {
		tr.t.Logf("#%d NATS request %s (%d subscribers; one answer each)\n%s", tr.next(), subject, want, renderMonitor(verb, out))
	}
	return out
}

// renderMonitor summarises micro INFO answers (name, instance, metadata,
// endpoint subjects and queue groups); other answers are shown whole.
func renderMonitor(verb string, answers [][]byte) string {
	var b strings.Builder
	for _, a := range answers {
		var info micro.Info
		if verb != "INFO" || json.Unmarshal(a, &info) != nil {
			fmt.Fprintf(&b, "    ← %s\n", a)
			continue
		}
		subs := map[string]bool{}
		for _, e := range info.Endpoints {
			subs[e.Subject[:strings.LastIndex(e.Subject, ".")]+".* queue "+e.QueueGroup] = true
		}
		fmt.Fprintf(&b, "    ← name %s id %s metadata %v endpoints %d on %v\n",
			info.Name, info.ID, info.Metadata, len(info.Endpoints), slices.Sorted(maps.Keys(subs)))
	}
	return strings.TrimRight(b.String(), "\n")
}

// infos decodes every instance's $SRV.INFO answer of service.
func (w *world) infos(tr *transcript, service string) []micro.Info {
	w.t.Helper()
	var out []micro.Info
	for _, a := range w.monitor(tr, "INFO", service) {
		var i micro.Info
		w.h.Check(json.Unmarshal(a, &i))
		out = append(out, i)
	}
	return out
}

// served sums, over every instance of service, the requests its endpoint
// op has handled ($SRV.STATS), and returns the sum and the count per
// instance.
func (w *world) served(service, op string) (int, []int) {
	w.t.Helper()
	sum, per := 0, []int{}
	for _, a := range w.monitor(nil, "STATS", service) {
		var s micro.Stats
		w.h.Check(json.Unmarshal(a, &s))
		n := 0
		for _, e := range s.Endpoints {
			if e.Name == op {
				n = e.NumRequests
			}
		}
		sum += n
		per = append(per, n)
	}
	return sum, per
}

// natsStatus asks for session sid's status over NATS (baton.ingress.<agent>.status).
func (w *world) natsStatus(tr *transcript, agent, sid string, quiet bool) ingress.Status {
	w.t.Helper()
	msg, err := tr.request(w.Names.AgentIngress(agent, "status"), map[string]string{"sessionId": sid}, quiet)
	w.h.Check(err)
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		w.t.Fatalf("status of %s over NATS: %s %s", sid, code, msg.Data)
	}
	var s ingress.Status
	w.h.Check(json.Unmarshal(msg.Data, &s))
	return s
}

// natsDeliver delivers text to sid over NATS (baton.ingress.<agent>.deliver).
func (w *world) natsDeliver(tr *transcript, agent, sid, text string, quiet bool) (ingress.Receipt, error) {
	tr.t.Helper()
	return receipt(tr.request(w.Names.AgentIngress(agent, "deliver"), map[string]string{"sessionId": sid, "text": text}, quiet))
}
