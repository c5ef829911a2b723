package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/baton-rt/baton/internal/bench"
)

// frozenPattern is the raw delivery pattern's writes, frozen at the
// calibration of the day it was fixed (one inbox publish, two record
// CASes, six event appends): fewer writes by Baton must not make its
// baseline faster too. The calibration of the run is still reported
// (calibrated=) so a change in Baton's writes shows.
var frozenPattern = writeCounts{inbox: 1, records: 2, events: 6}

// storeCounts are every stream's last sequence (each message a stream or
// bucket stored: inbox, events, records, journal, hooks, indexes, object
// store chunks, receipts, tombstones and markers) and the account's
// JetStream API calls but the bench's own (purges, consumer creates, …).
type storeCounts struct {
	streams map[string]uint64
	api     uint64
}

func (rg *rig) storeCounts(ctx context.Context) (storeCounts, error) {
	c := storeCounts{streams: map[string]uint64{}}
	names := rg.e.js.StreamNames(ctx)
	for name := range names.Name() {
		s, err := rg.e.js.Stream(ctx, name)
		if err != nil {
			return c, err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return c, err
		}
		c.streams[name] = info.State.LastSeq
		rg.ownAPI.Add(2) // the lookup and the info
	}
	if err := names.Err(); err != nil {
		return c, err
	}
	ai, err := rg.e.js.AccountInfo(ctx)
	if err != nil {
		return c, err
	}
	rg.ownAPI.Add(2) // the names and the account info
	c.api = ai.API.Total - rg.ownAPI.Load()
	return c, nil
}

// perDelivery are the fields of the writes between before and after, per
// delivery of m: writes_all= (every stream), writes_<STREAM>= for each
// stream that grew (the raw baselines' streams left out), api_calls=.
func perDelivery(before, after storeCounts, m int) []bench.Option {
	per := func(n uint64) string { return fmt.Sprintf("%.2f", float64(n)/float64(m)) }
	var all uint64
	var opts []bench.Option
	for _, name := range slices.Sorted(maps.Keys(after.streams)) {
		d := after.streams[name] - before.streams[name]
		if d == 0 || strings.HasPrefix(name, "RAW") || strings.HasPrefix(name, "KV_raw") {
			continue
		}
		all += d
		opts = append(opts, bench.Field("writes_"+name, per(d)))
	}
	// api_calls leaves out the bench's own info requests (rig.ownAPI).
	return append([]bench.Option{bench.Field("writes_all", per(all)), bench.Field("api_calls", per(after.api-before.api))}, opts...)
}
