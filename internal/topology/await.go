package topology

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
)

// Await is Ensure, retried with backoff for at most wait while the error
// can pass: a cluster still forming or one whose peer is briefly offline
// answers "no suitable peers for placement" or has no meta leader yet. An
// IncompatibleError (an existing resource Ensure may not change) is final
// at once. retry, when not nil, sees every error that is retried.
func Await(ctx context.Context, js jetstream.JetStream, cfg Config, wait time.Duration, retry func(error)) (*Topology, error) {
	var top *Topology
	op := func() error {
		var err error
		top, err = Ensure(ctx, js, cfg)
		var incompatible *IncompatibleError
		if errors.As(err, &incompatible) {
			return backoff.Permanent(err)
		}
		if err != nil && retry != nil {
			retry(err)
		}
		return err
	}
	if err := Retry(ctx, wait, op); err != nil {
		return nil, err
	}
	return top, nil
}

// Retry runs op until it succeeds, returns an error wrapped by
// backoff.Permanent (its error is returned at once, unwrapped), ctx ends or
// wait has passed, with the exponential backoff of the start-up waits:
// 250 ms first, at most 5 s apart.
func Retry(ctx context.Context, wait time.Duration, op func() error) error {
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(250*time.Millisecond), backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(wait)), ctx)
	return backoff.Retry(op, b)
}
