package ingress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config.
const (
	DefaultStartTimeout = 5 * time.Second
	DefaultFinishWait   = 10 * time.Second
	DefaultHeartbeat    = 15 * time.Second
	DefaultHubLinger    = 10 * time.Second
	DefaultHubRing      = 256
	DefaultClientQueue  = 1024
)

// Config.EndedAlias's values.
const (
	EndedAliasGone = "gone" // a delivery to an ended session's alias is 410 gone
	EndedAliasNew  = "new"  // it starts a new session that takes the alias over
)

// replacesEnded reports whether a delivery or create that names an ended
// session's alias starts a new session (Config.EndedAlias "new").
func (s *Server) replacesEnded() bool { return s.cfg.EndedAlias == EndedAliasNew }

// Config wires a Server.
type Config struct {
	NC         *nats.Conn
	JS         jetstream.JetStream
	Names      subjects.Names // zero: subjects.Default()
	Deployment string         // this ingress's deployment: stamped as acceptedDeploymentId unless its agent has one promoted
	// Agent is the agent the ingress serves (docs/runtime.md R10;
	// "" is subjects.DefaultAgent): its promoted deployment is stamped,
	// and deliveries to another agent's sessions are refused.
	Agent string
	// Tokens are the bearer tokens accepted on /v1/; AdminTokens those on
	// /v1/admin/. Without Tokens, New refuses unless InsecureDev is set.
	Tokens      []string
	AdminTokens []string
	InsecureDev bool
	Limits      Limits
	// StartTimeout bounds a start request to this deployment's owners.
	StartTimeout time.Duration
	// EndedAlias is what a delivery (or a create) does with the alias of
	// an ended session: EndedAliasGone (the default) answers 410 gone;
	// EndedAliasNew starts a new session that takes the alias over
	// (docs/api.md, "Aliases that start over").
	EndedAlias string
	// FinishWait bounds how long the admin end or retry of a quarantined
	// session waits for an owner to carry it out before it answers
	// 202 {"pending":true} (docs/api.md, "Quarantine").
	FinishWait time.Duration
	// Heartbeat is the interval of SSE comment lines on an idle stream.
	Heartbeat time.Duration
	// HubLinger keeps a session's event hub (and its one consumer) alive
	// this long after its last client left, for clients that reconnect.
	HubLinger time.Duration
	// HubRing is how many recent events a hub keeps for joining clients;
	// ClientQueue how many live events a client may lag behind before it
	// catches up from the stream instead.
	HubRing     int
	ClientQueue int
	// CORSOrigins are the browser origins allowed to call the API
	// (scheme://host[:port] exactly as a browser sends Origin, see
	// CheckCORSOrigin; never "*"). None: no CORS at all (docs/api.md,
	// "Browsers: CORS and stream tokens").
	CORSOrigins []string
	// StreamTokenKeys sign (the first) and verify (each) the stream tokens
	// of the events route's ?token= (at most MaxStreamTokenKeys, each at
	// least MinStreamTokenKeyBytes). None: stream tokens are disabled.
	StreamTokenKeys [][]byte
	// StreamTokenTTL is a stream token's lifetime (default
	// DefaultStreamTokenTTL, at most MaxStreamTokenTTL).
	StreamTokenTTL time.Duration
	// UI serves the session inspector (package ui, docs/ui.md) at GET
	// /ui/, without a token (the app asks its user for the tokens it
	// sends), and redirects GET /ui there; off, both are 404.
	UI bool
	// Registerer receives the metrics (nil: a private registry).
	Registerer prometheus.Registerer
	Log        *slog.Logger
	Now        func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Names == (subjects.Names{}) {
		c.Names = subjects.Default()
	}
	c.Limits = c.Limits.withDefaults()
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.FinishWait <= 0 {
		c.FinishWait = DefaultFinishWait
	}
	if c.EndedAlias == "" {
		c.EndedAlias = EndedAliasGone
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.HubLinger < 0 {
		c.HubLinger = 0
	} else if c.HubLinger == 0 {
		c.HubLinger = DefaultHubLinger
	}
	if c.HubRing <= 0 {
		c.HubRing = DefaultHubRing
	}
	if c.ClientQueue <= 0 {
		c.ClientQueue = DefaultClientQueue
	}
	if c.StreamTokenTTL <= 0 {
		c.StreamTokenTTL = DefaultStreamTokenTTL
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Server is the ingress: the operations, their HTTP handler and their NATS
// micro service. It is safe for concurrent use.
type Server struct {
	cfg  Config
	log  *slog.Logger
	met  *metrics
	auth *auth
	hubs *hubs
	busy inflight // requests being served, for Drain

	routesMu sync.Mutex
	routes   []string // the patterns Handler registered (Routes)

	attachMu sync.Mutex
	att      atomic.Pointer[attached]

	mismatch atomic.Pointer[kv.AgentMismatchError] // the deployment belongs to another agent

	life context.Context // the server's life: the fleet watch (ended by Close)
	stop context.CancelFunc
}

// attached are the handles that need the topology. The ingress starts
// without it (readyz says 503 until it exists) and opens them on first use.
type attached struct {
	store    *kv.Store
	inbox    jetstream.Stream
	events   jetstream.Stream
	receipts *receipts
	refs     *refs     // resolves message.output content stored out of line
	fleet    *kv.Fleet // agents, promotions, retirements, live owners
	unwatch  context.CancelFunc
	index    atomic.Pointer[kv.Index] // the session index, opened on first use
}

// New validates cfg and returns a Server. It does no I/O: the topology is
// opened on first use (see Ready).
func New(cfg Config) (*Server, error) {
	if err := subjects.ValidateDeployment(cfg.Deployment); err != nil {
		return nil, fmt.Errorf("ingress: deployment: %w", err)
	}
	if cfg.Agent != "" {
		if err := subjects.ValidateAgent(cfg.Agent); err != nil {
			return nil, fmt.Errorf("ingress: agent: %w", err)
		}
	}
	if cfg.NC == nil || cfg.JS == nil {
		return nil, errors.New("ingress: NC and JS are required")
	}
	if len(cfg.Tokens) == 0 && !cfg.InsecureDev {
		return nil, errors.New("ingress: no bearer tokens (give Tokens, or InsecureDev for local development)")
	}
	if cfg.EndedAlias != "" && cfg.EndedAlias != EndedAliasGone && cfg.EndedAlias != EndedAliasNew {
		return nil, fmt.Errorf("ingress: ended alias %q: want %s or %s", cfg.EndedAlias, EndedAliasGone, EndedAliasNew)
	}
	if err := checkCORSOrigins(cfg.CORSOrigins); err != nil {
		return nil, err
	}
	if err := checkStreamTokens(cfg.StreamTokenKeys, cfg.StreamTokenTTL); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, met: met, auth: newAuth(cfg.Tokens, cfg.AdminTokens, cfg.InsecureDev)}
	s.log = cfg.Log.With(slog.String("deployment", cfg.Deployment))
	s.life, s.stop = context.WithCancel(context.Background())
	s.hubs = newHubs(s)
	s.busy.gauge = met.inflight
	return s, nil
}

// Close stops every event hub (and deletes its consumer). Open SSE
// responses end.
func (s *Server) Close() {
	s.hubs.close()
	s.stop()
}

// Enroll attaches the ingress to the topology, trying again every second
// until it exists or ctx ends: it registers the deployment's agent and
// starts following the fleet. A deployment that belongs to another agent
// is a *kv.AgentMismatchError at once (the binary exits 1 on it); ctx's
// end is its error.
func (s *Server) Enroll(ctx context.Context) error {
	for {
		_, err := s.topology(ctx)
		if err == nil {
			return nil
		}
		if e := s.mismatch.Load(); e != nil {
			return e
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// topology returns the attached handles, opening them if needed.
func (s *Server) topology(ctx context.Context) (*attached, error) {
	if a := s.att.Load(); a != nil {
		return a, nil
	}
	s.attachMu.Lock()
	defer s.attachMu.Unlock()
	if a := s.att.Load(); a != nil {
		return a, nil
	}
	a, err := s.open(ctx)
	if e := (*kv.AgentMismatchError)(nil); errors.As(err, &e) {
		s.mismatch.Store(e)
		return nil, fail(ErrUnavailable, "%v", err)
	}
	if err != nil {
		return nil, fail(ErrUnavailable, "the Baton topology is not ready: %v", err)
	}
	s.att.Store(a)
	return a, nil
}

func (s *Server) open(ctx context.Context) (*attached, error) {
	n := s.cfg.Names
	inbox, err := s.cfg.JS.Stream(ctx, n.InboxStream())
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", n.InboxStream(), err)
	}
	events, err := s.cfg.JS.Stream(ctx, n.EventsStream())
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", n.EventsStream(), err)
	}
	store, err := kv.Open(ctx, s.cfg.JS, n)
	if err != nil {
		return nil, err
	}
	state, err := s.cfg.JS.ObjectStore(ctx, n.StateBucket())
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", n.StateBucket(), err)
	}
	rc, err := openReceipts(ctx, s.cfg.JS, n, inbox.CachedInfo().Config)
	if err != nil {
		return nil, err
	}
	refs := newRefs(state, s.log, s.met, s.cfg.Now)
	if err := store.RegisterAgent(ctx, s.cfg.Deployment, s.agent()); err != nil {
		return nil, err
	}
	watch, unwatch := context.WithCancel(s.life)
	fleet, err := store.WatchFleet(watch, s.log.Warn)
	if err != nil {
		unwatch()
		return nil, err
	}
	select {
	case <-fleet.Loaded():
	case <-ctx.Done():
		unwatch()
		return nil, ctx.Err()
	}
	return &attached{store: store, inbox: inbox, events: events, receipts: rc, refs: refs, fleet: fleet, unwatch: unwatch}, nil
}

// Ready reports whether the ingress can serve: NATS connected and the
// topology present (its streams, buckets, the state object store and the
// receipts bucket).
func (s *Server) Ready(ctx context.Context) error {
	if !s.cfg.NC.IsConnected() {
		return errors.New("ingress: NATS is not connected")
	}
	a, err := s.topology(ctx)
	if err != nil {
		return err
	}
	for _, st := range []jetstream.Stream{a.inbox, a.events} {
		name := st.CachedInfo().Config.Name
		if _, err := s.cfg.JS.Stream(ctx, name); err != nil {
			return fmt.Errorf("ingress: stream %s: %w", name, err)
		}
	}
	return nil
}

func (s *Server) now() time.Time { return s.cfg.Now() }
