package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Leader reads. nats.go's kv.Get, GetRevision, GetMsg and
// GetLastMsgForSubject use direct get whenever the stream allows it, and on
// a cluster any current replica answers a direct get, so right after a
// write it may return an older message (docs/nats-layout.md, "NATS facts"). The JetStream API's
// STREAM.MSG.GET is answered by the stream leader only, which has applied
// every write it acknowledged. jetstream has no way to force it on a stream
// with AllowDirect, hence this raw request, sent under the API prefix (or
// domain) of the caller's jetstream.JetStream.
//
// A stream without a leader does not answer it: for a few seconds after the
// leader's node dies the followers still believe in the old leader and stay
// silent. So every request waits at most requestTimeout and is sent again,
// with backoff, until the caller's deadline; an answer (a message, not
// found, an API error other than "temporarily unavailable") is final.

// Bounds of one leader read.
const (
	// requestTimeout bounds one request (or the jetstream default timeout,
	// when that is shorter).
	requestTimeout = time.Second
	// defaultTimeout bounds a whole read whose ctx has no deadline when the
	// JetStream context has no default timeout either.
	defaultTimeout = 5 * time.Second
	resendFirst    = 20 * time.Millisecond
	resendMax      = 500 * time.Millisecond
)

// codeClusterNotAvail is the server's JSClusterNotAvailErr ("JetStream
// system temporarily unavailable"), the answer of a stream group member
// that knows its group has no leader. nats.go has no constant for it.
const codeClusterNotAvail jetstream.ErrorCode = 10008

// Leaderless reports an answer that means "no leader to answer yet": no
// responders, a timeout, no response from the stream, or the cluster not
// available. Such a request may be sent again (with the same message ID,
// or as a CAS at the same revision) once the group has a leader.
func Leaderless(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.As(err, &api) && api.ErrorCode == codeClusterNotAvail
}

// apiPrefix is the JetStream API prefix js sends its requests under.
func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	}
	return jetstream.DefaultAPIPrefix
}

// msgGetSubject is the leader-only message get subject of a stream. It is a
// JetStream API subject, not a Baton name, so subjects/ has no builder for
// it; the stream name comes from the caller or the server.
func msgGetSubject(prefix, stream string) string { return prefix + "STREAM.MSG.GET." + stream }

// msgGetRequest selects one message: Seq alone, LastFor alone, or NextFor
// with Seq as the first sequence to consider.
type msgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
}

func (r msgGetRequest) String() string {
	switch {
	case r.LastFor != "":
		return "last message on " + r.LastFor
	case r.NextFor != "":
		return fmt.Sprintf("first message on %s from %d", r.NextFor, r.Seq)
	}
	return fmt.Sprintf("message %d", r.Seq)
}

type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject string    `json:"subject"`
		Seq     uint64    `json:"seq"`
		Header  []byte    `json:"hdrs,omitempty"`
		Data    []byte    `json:"data,omitempty"`
		Time    time.Time `json:"time"`
	} `json:"message,omitempty"`
}

// leader sends leader-only message gets for one stream.
type leader struct {
	nc      *nats.Conn
	stream  string
	subject string        // <API prefix>STREAM.MSG.GET.<stream>
	prefix  string        // the JetStream API prefix, "$JS.API." by default
	try     time.Duration // bound of one request
	wait    time.Duration // bound of a read whose ctx has no deadline
}

func newLeader(js jetstream.JetStream, stream string) leader {
	o := js.Options()
	l := leader{nc: js.Conn(), stream: stream, prefix: apiPrefix(o), subject: msgGetSubject(apiPrefix(o), stream),
		try: requestTimeout, wait: defaultTimeout}
	if o.DefaultTimeout > 0 {
		l.try, l.wait = min(l.try, o.DefaultTimeout), o.DefaultTimeout
	}
	return l
}

// get reads the message req selects from the stream leader, sending the
// request again while nobody answers it, until ctx's deadline (l.wait when
// ctx has none). No such message is record.ErrNotFound.
func (l leader) get(ctx context.Context, req msgGetRequest) (*jetstream.RawStreamMsg, error) {
	body, err := json.Marshal(req)
	if err == nil {
		var m *jetstream.RawStreamMsg
		if m, err = l.resend(ctx, body); err == nil {
			return m, nil
		}
	}
	return nil, fmt.Errorf("kv: leader read %s, %v: %w", l.stream, req, err)
}

// resend sends body with backoff until it is answered or ctx ends; the
// deadline's error then carries the last attempt's.
func (l leader) resend(ctx context.Context, body []byte) (*jetstream.RawStreamMsg, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.wait)
		defer cancel()
	}
	var last error
	m, err := backoff.RetryWithData(func() (*jetstream.RawStreamMsg, error) {
		m, err := l.once(ctx, body)
		last = err
		return m, err
	}, backoff.WithContext(resendBackoff(), ctx))
	if err != nil && err == ctx.Err() && last != nil {
		return nil, fmt.Errorf("%w (last attempt: %w)", err, last)
	}
	return m, err
}

func resendBackoff() backoff.BackOff {
	return backoff.NewExponentialBackOff(backoff.WithInitialInterval(resendFirst),
		backoff.WithMaxInterval(resendMax), backoff.WithMaxElapsedTime(0))
}

// once sends one request and waits at most l.try for its answer. An error
// worth sending the request again for is returned as is; every other one
// is backoff.Permanent. get adds the stream and the request to the text.
func (l leader) once(ctx context.Context, body []byte) (*jetstream.RawStreamMsg, error) {
	rctx, cancel := context.WithTimeout(ctx, l.try)
	defer cancel()
	msg, err := l.nc.RequestWithContext(rctx, l.subject, body)
	switch {
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrBadSubject):
		return nil, backoff.Permanent(err)
	case err != nil: // no answer in time, no responders, disconnected: again
		return nil, err
	}
	return parseMsgGet(msg.Data)
}

func parseMsgGet(data []byte) (*jetstream.RawStreamMsg, error) {
	var resp msgGetResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, backoff.Permanent(err)
	}
	switch {
	// A raw API answer: the error code is all there is to match on.
	case resp.Error != nil && resp.Error.ErrorCode == codeClusterNotAvail:
		return nil, resp.Error // the group has no leader yet: again
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, backoff.Permanent(fmt.Errorf("%w: %w", record.ErrNotFound, resp.Error))
	case resp.Error != nil:
		return nil, backoff.Permanent(resp.Error)
	case resp.Message == nil:
		return nil, backoff.Permanent(errors.New("empty answer"))
	}
	return rawMsg(resp)
}

func rawMsg(resp msgGetResponse) (*jetstream.RawStreamMsg, error) {
	m := resp.Message
	out := &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: m.Seq, Data: m.Data, Time: m.Time}
	if len(m.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(m.Header)
		if err != nil {
			return nil, backoff.Permanent(fmt.Errorf("headers: %w", err))
		}
		out.Header = h
	}
	return out, nil
}
