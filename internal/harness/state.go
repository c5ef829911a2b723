package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// Record reads the session record from the stream leader.
func (e *Env) Record(ctx context.Context, id string) (record.Session, error) {
	cur, err := e.Store.LeaderSession(ctx, id)
	if err != nil {
		return record.Session{}, fmt.Errorf("record of %s: %w", id, err)
	}
	return cur, nil
}

// WaitRecord polls the session record (leader reads) until ok holds for it
// and returns it.
func (e *Env) WaitRecord(ctx context.Context, id string, timeout time.Duration, ok func(record.SessionRecord) bool) (record.Session, error) {
	var cur record.Session
	var err error
	if perr := Poll(ctx, timeout, func() bool {
		cur, err = e.Store.LeaderSession(ctx, id)
		return err == nil && ok(cur.Record)
	}); perr != nil {
		return cur, fmt.Errorf("record of %s: %w (last %+v, %v)", id, perr, cur.Record, err)
	}
	return cur, nil
}

// Hook reads an address's hook; ok is false when there is none.
func (e *Env) Hook(ctx context.Context, addr string) (h record.Hook, ok bool, err error) {
	tok, err := subjects.EncodeToken(addr)
	if err != nil {
		return record.Hook{}, false, err
	}
	h, _, err = e.Store.GetHook(ctx, tok)
	if errors.Is(err, record.ErrNotFound) {
		return record.Hook{}, false, nil
	}
	if err != nil {
		return record.Hook{}, false, fmt.Errorf("hook %s: %w", addr, err)
	}
	return h, true, nil
}

// ConsumerExists reports whether the inbox stream has consumer name.
func (e *Env) ConsumerExists(ctx context.Context, name string) (bool, error) {
	_, err := e.JS.Consumer(ctx, e.Names.InboxStream(), name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("consumer %s: %w", name, err)
	}
	return true, nil
}

// Consumers lists the inbox stream's consumer names.
func (e *Env) Consumers(ctx context.Context) ([]string, error) {
	s, err := e.JS.Stream(ctx, e.Names.InboxStream())
	if err != nil {
		return nil, err
	}
	var out []string
	l := s.ConsumerNames(ctx)
	for n := range l.Name() {
		out = append(out, n)
	}
	return out, l.Err()
}

// LastSeqs is the last sequence of every named stream (a KV bucket is
// stream KV_<bucket>).
func (e *Env) LastSeqs(ctx context.Context, streams ...string) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, name := range streams {
		st, err := e.JS.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		out[name] = info.State.LastSeq
	}
	return out, nil
}
