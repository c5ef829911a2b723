package pool

import (
	"context"
	"log/slog"
	"time"

	"github.com/baton-rt/baton/wire"
)

// Advertising: an owner records in its deployment record
// (baton_owners/deploy.<id>) the inbox wire versions and checkpoint state
// versions it reads, so a producer (the ingress, a parent session's owner)
// can tell what the deployment can be sent. It runs once per Run, before
// the lease is first acquired (so a serving owner has advertised): a
// failure is logged and retried a bounded number of times, and never stops
// the owner (a producer that finds no versions reads the
// deployment as version 1).

const (
	advertiseAttempts = 3
	advertiseBackoff  = 250 * time.Millisecond
)

// advertise writes this build's versions to the deployment record.
func advertise(ctx context.Context, cfg *Config, log *slog.Logger, fp points) {
	wv, sv := reads(fp)
	for attempt := 1; attempt <= advertiseAttempts; attempt++ {
		err := cfg.Store.AdvertiseDeployment(ctx, cfg.Deployment, wv, sv)
		if err == nil {
			log.Debug("deployment versions advertised", "wireVersions", wv, "stateVersions", sv)
			return
		}
		if ctx.Err() != nil {
			return
		}
		log.Warn("advertise deployment versions", "attempt", attempt, "err", err)
		sleep(ctx, time.Duration(attempt)*advertiseBackoff)
	}
}

// reads are the inbox wire versions (1 to wire.CurrentVersion; version 0
// is lifted but never produced) and checkpoint state versions this process
// reads (capped by the ReadStateVersion fault, as an older build).
func reads(fp points) (wireVersions, stateVersions []int) {
	for v := 1; v <= wire.CurrentVersion; v++ {
		wireVersions = append(wireVersions, v)
	}
	top := fp.readStateVersion()
	for v := wire.MinStateVersion; v <= top; v++ {
		stateVersions = append(stateVersions, v)
	}
	return wireVersions, stateVersions
}
