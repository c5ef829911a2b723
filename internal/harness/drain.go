package harness

import (
	"context"
	"fmt"
	"net/http"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/record"
)

// DrainReport reads every page of GET base/v1/admin/deployments (limit
// sessions a page) and merges them: per deployment, the sessions by state,
// the idle count and every session not idle.
func (c *Client) DrainReport(ctx context.Context, base string, limit int, opts ...Option) (map[string]*ingress.DeploymentReport, error) {
	out := map[string]*ingress.DeploymentReport{}
	after := ""
	for {
		url := fmt.Sprintf("%s/v1/admin/deployments?limit=%d", base, limit)
		if after != "" {
			url += "&after=" + after
		}
		var page ingress.DrainReport
		if err := c.Call(ctx, http.MethodGet, url, nil, http.StatusOK, &page, opts...); err != nil {
			return nil, fmt.Errorf("drain report: %w", err)
		}
		for _, d := range page.Deployments {
			merge(out, d)
		}
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

func merge(out map[string]*ingress.DeploymentReport, d ingress.DeploymentReport) {
	sum := out[d.DeploymentID]
	if sum == nil {
		sum = &ingress.DeploymentReport{DeploymentID: d.DeploymentID, Sessions: map[string]int{}}
		out[d.DeploymentID] = sum
	}
	sum.Retired = d.Retired
	for k, v := range d.Sessions {
		sum.Sessions[k] += v
	}
	sum.Idle += d.Idle
	sum.NotIdle = append(sum.NotIdle, d.NotIdle...)
}

// Live counts the sessions of a deployment's report that have not ended.
func Live(d *ingress.DeploymentReport) int {
	if d == nil {
		return 0
	}
	n := 0
	for state, c := range d.Sessions {
		if state != string(record.StateEnded) {
			n += c
		}
	}
	return n
}
