package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/baton-rt/baton/runtime"
)

// TaskFetch is the demo's own background task kind: GET a URL.
const TaskFetch = "fetch"

// FetchInput is a fetch task's input.
type FetchInput struct {
	URL string `json:"url"`
}

// FetchResult is a fetch task's result.
type FetchResult struct {
	URL    string `json:"url"`
	Status int    `json:"status"`
	Bytes  int    `json:"bytes"`
}

// maxFetchBytes bounds what a fetch reads of a body.
const maxFetchBytes = 1 << 20

// Fetch is the handler of the demo's "fetch" tasks (the /fetch <url>
// directive): a GET of the input's URL with the task ID as its
// Idempotency-Key and the process in X-Baton-Process; each real execution
// that got an answer is recorded in a.Effects. Register it with
// owner.WithTask(demo.TaskFetch, agent.Fetch).
func (a *Agent) Fetch(ctx context.Context, t runtime.TaskRun) (json.RawMessage, error) {
	var in FetchInput
	if err := json.Unmarshal(t.Input, &in); err != nil || in.URL == "" {
		return nil, fmt.Errorf("fetch: the input is not {\"url\": …}: %s", t.Input)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	req.Header.Set("Idempotency-Key", t.ID)
	req.Header.Set("X-Baton-Process", a.Process)
	t.Progress("fetching " + in.URL)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, maxFetchBytes))
	if a.Effects != nil {
		a.Effects.Record(Effect{SessionID: t.SessionID, StepKey: "task:" + t.ID, Call: 1, Key: t.ID})
	}
	return json.Marshal(FetchResult{URL: in.URL, Status: resp.StatusCode, Bytes: int(n)})
}
