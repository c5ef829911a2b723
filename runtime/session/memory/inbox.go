package memory

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/baton-rt/baton/runtime/session"
)

// ErrCursorDeleted is what a reader's Lost receives when its cursor is
// deleted while it reads (a successor took the session over).
var ErrCursorDeleted = errors.New("memory: cursor deleted")

// ErrNoMessage and ErrOtherToken are Read's: no message at the sequence,
// or one on a token the read did not name.
var (
	ErrNoMessage  = errors.New("memory: no message at this sequence")
	ErrOtherToken = errors.New("memory: the message is on another token")
)

// Inbox is session.Inbox and session.Backlog in memory: one stream of
// messages, each on one token, sequenced from 1; named cursors that
// deliver the messages of their tokens in stream order from their start.
type Inbox struct {
	mu      sync.Mutex
	seq     uint64
	msgs    []message // in seq order
	cursors map[string]*cursor
	grew    chan struct{} // closed and replaced when a message is added
	// Opened counts Open calls per cursor name.
	opened map[string]int
	held   bool // readers deliver nothing (a slow consumer)
}

// Hold stops every reader from delivering (a consumer slow to deliver on a
// loaded machine) until Hold(false).
func (ib *Inbox) Hold(held bool) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	ib.held = held
	close(ib.grew)
	ib.grew = make(chan struct{})
}

type message struct {
	seq    uint64
	token  string
	data   []byte
	stored time.Time
}

type cursor struct {
	session.Cursor
	reader *reader // the open reader, if any
}

// NewInbox returns an empty inbox.
func NewInbox() *Inbox {
	return &Inbox{cursors: map[string]*cursor{}, grew: make(chan struct{}), opened: map[string]int{}}
}

var (
	_ session.Inbox         = (*Inbox)(nil)
	_ session.Backlog       = (*Inbox)(nil)
	_ session.MessageReader = (*Inbox)(nil)
)

// Publish stores data on token and returns its sequence.
func (ib *Inbox) Publish(token string, data []byte) uint64 {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	ib.seq++
	ib.msgs = append(ib.msgs, message{seq: ib.seq, token: token, data: data, stored: time.Now()})
	close(ib.grew)
	ib.grew = make(chan struct{})
	return ib.seq
}

// Open (re)creates the named cursor at c.Start and starts delivering. An
// open reader of the same name stops (as a consumer re-created under it).
func (ib *Inbox) Open(_ context.Context, c session.Cursor) (session.Reader, error) {
	if c.Name == "" || len(c.Tokens) == 0 {
		return nil, errors.New("memory: a cursor needs a name and tokens")
	}
	ib.mu.Lock()
	old := ib.cursors[c.Name]
	r := &reader{ib: ib, tokens: slices.Clone(c.Tokens), next: max(c.Start, 1), out: make(chan session.Delivery, 64),
		lost: make(chan error, 1), stop: make(chan struct{}), done: make(chan struct{})}
	ib.cursors[c.Name] = &cursor{Cursor: c, reader: r}
	ib.opened[c.Name]++
	ib.mu.Unlock()
	if old != nil && old.reader != nil {
		old.reader.lose(ErrCursorDeleted)
	}
	go r.run()
	return r, nil
}

// Opened reports how many times the named cursor was opened.
func (ib *Inbox) Opened(name string) int {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return ib.opened[name]
}

// Exists reports whether the named cursor exists.
func (ib *Inbox) Exists(_ context.Context, name string) (bool, error) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	_, ok := ib.cursors[name]
	return ok, nil
}

// Delete removes the named cursor; its open reader receives
// ErrCursorDeleted on Lost.
func (ib *Inbox) Delete(_ context.Context, name string) error {
	ib.mu.Lock()
	c := ib.cursors[name]
	delete(ib.cursors, name)
	ib.mu.Unlock()
	if c != nil && c.reader != nil {
		c.reader.lose(ErrCursorDeleted)
	}
	return nil
}

// Purge removes the messages below seq on each token.
func (ib *Inbox) Purge(_ context.Context, tokens []string, below uint64) error {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	ib.msgs = slices.DeleteFunc(ib.msgs, func(m message) bool { return m.seq < below && slices.Contains(tokens, m.token) })
	return nil
}

// Forget removes the messages at seqs.
func (ib *Inbox) Forget(_ context.Context, seqs []uint64) error {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	ib.msgs = slices.DeleteFunc(ib.msgs, func(m message) bool { return slices.Contains(seqs, m.seq) })
	return nil
}

// Read returns the message at seq if it is on one of tokens. It reads a
// held inbox too: a read by sequence waits for no cursor.
func (ib *Inbox) Read(_ context.Context, tokens []string, seq uint64) (session.Delivery, error) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	for _, m := range ib.msgs {
		if m.seq != seq {
			continue
		}
		if !slices.Contains(tokens, m.token) {
			return session.Delivery{}, ErrOtherToken
		}
		return session.Delivery{Seq: m.seq, Data: m.data, Stored: m.stored}, nil
	}
	return session.Delivery{}, ErrNoMessage
}

// After returns the lowest sequence above seq on any of tokens (0: none).
func (ib *Inbox) After(_ context.Context, tokens []string, seq uint64) (uint64, error) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	for _, m := range ib.msgs {
		if m.seq > seq && slices.Contains(tokens, m.token) {
			return m.seq, nil
		}
	}
	return 0, nil
}

// nextFor is the first message at or above seq on tokens, or the channel
// that is closed when the inbox grows.
func (ib *Inbox) nextFor(tokens []string, seq uint64) (message, bool, <-chan struct{}) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	for _, m := range ib.msgs {
		if !ib.held && m.seq >= seq && slices.Contains(tokens, m.token) {
			return m, true, nil
		}
	}
	return message{}, false, ib.grew
}

// reader is one open cursor.
type reader struct {
	ib     *Inbox
	tokens []string
	next   uint64
	out    chan session.Delivery
	lost   chan error
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

func (r *reader) Deliveries() <-chan session.Delivery { return r.out }
func (r *reader) Lost() <-chan error                  { return r.lost }

// Close stops delivery; the cursor stays.
func (r *reader) Close() {
	r.once.Do(func() { close(r.stop) })
	<-r.done
}

// lose ends delivery with err on Lost, unless the reader was closed.
func (r *reader) lose(err error) {
	r.once.Do(func() {
		r.lost <- err
		close(r.stop)
	})
}

func (r *reader) run() {
	defer close(r.done)
	for {
		m, ok, grew := r.ib.nextFor(r.tokens, r.next)
		if !ok {
			select {
			case <-grew:
				continue
			case <-r.stop:
				return
			}
		}
		select {
		case r.out <- session.Delivery{Seq: m.seq, Data: m.data, Stored: m.stored}:
			r.next = m.seq + 1
		case <-r.stop:
			return
		}
	}
}
