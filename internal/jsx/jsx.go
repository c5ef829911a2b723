// Package jsx holds the few JetStream operations the nats.go jetstream
// package does not offer as Baton needs them: leader reads. nats.go's
// GetMsg/GetLastMsgForSubject (and KV Get) use direct gets whenever the
// stream allows them, and any replica may answer a direct get with an older
// value (NATS.md). A leader read sends $JS.API.STREAM.MSG.GET.<stream>,
// which only the stream leader answers.
package jsx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotFound is returned when no message matches.
var ErrNotFound = errors.New("jsx: message not found")

// Query selects a message: exactly one of Seq, LastFor, NextFor (with Seq as
// the starting sequence).
type Query struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
}

type response struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject  string    `json:"subject"`
		Sequence uint64    `json:"seq"`
		Header   []byte    `json:"hdrs,omitempty"`
		Data     []byte    `json:"data,omitempty"`
		Time     time.Time `json:"time"`
	} `json:"message,omitempty"`
}

const codeMsgNotFound = 10037

// LeaderGet reads one message of stream from its leader.
func LeaderGet(ctx context.Context, nc *nats.Conn, stream string, q Query) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	msg, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, fmt.Errorf("jsx: leader get %s: %w", stream, err)
	}
	var resp response
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("jsx: leader get %s: %w", stream, err)
	}
	return decode(stream, resp)
}

func decode(stream string, resp response) (*jetstream.RawStreamMsg, error) {
	if resp.Error != nil {
		if resp.Error.ErrorCode == codeMsgNotFound {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("jsx: leader get %s: %w", stream, resp.Error)
	}
	if resp.Message == nil {
		return nil, fmt.Errorf("jsx: leader get %s: empty response", stream)
	}
	m := resp.Message
	var hdr nats.Header
	if len(m.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(m.Header)
		if err != nil {
			return nil, err
		}
		hdr = h
	}
	return &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: m.Sequence, Header: hdr, Data: m.Data, Time: m.Time}, nil
}
