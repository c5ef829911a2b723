package ingress

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/micro"
)

// The NATS interface: the same operations as a micro service
// "baton-ingress-<agent>", one endpoint per operation on
// baton.ingress.<agent>.<op>, all in the queue group
// "baton-ingress-<agent>" (every ingress of the agent shares the load, and
// no other agent's ingress sees it). The default agent's ingresses also
// serve the un-prefixed service of builds before agents: "baton-ingress"
// on baton.ingress.<op> in the queue group "baton-ingress" — deprecated,
// kept for one release.
// Request and answer bodies are the HTTP ones; operations on one session
// carry its ID in the body ({"sessionId", ...}). Two operations exist
// only on NATS: events (pages of a session's events, long-polled) and
// blob (out-of-line content by digest) — natsevents.go, natsblob.go. Each
// endpoint's metadata carries its request, response and error JSON
// Schemas from docs/openapi.yaml (microschema.go). A refusal carries the
// headers Nats-Service-Error-Code (the HTTP status, e.g. "404") and
// Nats-Service-Error (the message), and the same JSON error body
// {"error":{"code","message"}}. Authorization is NATS's: see docs/api.md
// for the permissions a channel service needs.

// ServiceName and QueueGroup of the default agent's un-prefixed micro
// service (deprecated: use AgentServiceName and baton.ingress.<agent>.*).
const (
	ServiceName = "baton-ingress"
	QueueGroup  = "baton-ingress"
)

// AgentServiceName is the name, and the queue group, of an agent's micro
// service: baton-ingress-<agent>.
func AgentServiceName(agent string) string { return ServiceName + "-" + agent }

// Services are the micro services an ingress serves: its agent's, and for
// the default agent the deprecated un-prefixed one.
type Services []micro.Service

// Stop stops every service; the first error is returned.
func (ss Services) Stop() error {
	var first error
	for _, svc := range ss {
		if err := svc.Stop(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Version is the ingress API version the micro service reports.
const Version = "1.0.0"

// Operations lists the micro endpoints, in order.
var Operations = []string{"create", "deliver", "cancel", "reset", "clear", "compact", "input", "authorize", "tag", "end", "delete", "status", "command", "events", "blob"}

// RuntimeOnlyOperations are the endpoints (baton.ingress.<kind>) of the
// runtime-internal command kinds: each answers every request 400
// runtime_only_command, so a channel that tries one is told why.
var RuntimeOnlyOperations = kindNames(RuntimeOnlyKinds)

func kindNames(kinds []wire.Kind) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = string(k)
	}
	return out
}

// Micro registers the micro services on the server's connection: the
// agent's (baton.ingress.<agent>.*), and for the default agent the
// deprecated un-prefixed one (baton.ingress.*). ctx bounds every
// operation; Stop the services to remove them.
func (s *Server) Micro(ctx context.Context) (Services, error) {
	agent := s.agent()
	svc, err := s.service(ctx, AgentServiceName(agent), "Baton ingress of agent "+agent+
		": start sessions and send them commands (the HTTP API over NATS)",
		func(op string) string { return s.cfg.Names.AgentIngress(agent, op) })
	if err != nil {
		return nil, err
	}
	out := Services{svc}
	admin, err := s.adminService(ctx)
	if err != nil {
		_ = out.Stop()
		return nil, err
	}
	out = append(out, admin)
	if agent == subjects.DefaultAgent {
		legacy, err := s.service(ctx, ServiceName, "Baton ingress of the default agent on the un-prefixed subjects "+
			"(deprecated: use "+AgentServiceName(agent)+" on "+s.cfg.Names.AgentIngress(agent, "*")+")", s.cfg.Names.Ingress)
		if err != nil {
			_ = out.Stop()
			return nil, err
		}
		out = append(out, legacy)
	}
	return out, nil
}

// service adds one micro service, its queue group its name, with an
// endpoint per operation on subject(op).
func (s *Server) service(ctx context.Context, name, description string, subject func(op string) string) (micro.Service, error) {
	svc, err := micro.AddService(s.cfg.NC, micro.Config{
		Name: name, Version: Version, QueueGroup: name, Description: description,
		Metadata: map[string]string{"deployment": s.cfg.Deployment, "agent": s.agent(), "prefix": s.cfg.Names.Prefix()},
	})
	if err != nil {
		return nil, err
	}
	for _, op := range append(slices.Clone(Operations), RuntimeOnlyOperations...) {
		h := s.microOp(op)
		md, err := schemaMetadata(op)
		if err == nil {
			err = svc.AddEndpoint(strings.ReplaceAll(op, ".", "-"), micro.ContextHandler(ctx, func(ctx context.Context, req micro.Request) {
				s.serveMicro(ctx, op, req, h)
			}), micro.WithEndpointSubject(subject(op)), micro.WithEndpointQueueGroup(name), micro.WithEndpointMetadata(md))
		}
		if err != nil {
			_ = svc.Stop()
			return nil, err
		}
	}
	return svc, nil
}

// microHandler runs one operation on a request body.
type microHandler func(ctx context.Context, body []byte) (any, error)

func (s *Server) microOp(op string) microHandler {
	lim := s.cfg.Limits
	send := func(parse func([]byte) (Request, error)) microHandler {
		return func(ctx context.Context, b []byte) (any, error) {
			r, err := parse(b)
			if err != nil {
				return nil, err
			}
			return s.Send(ctx, r)
		}
	}
	if slices.Contains(RuntimeOnlyOperations, op) {
		return func(context.Context, []byte) (any, error) { return nil, runtimeOnly(wire.Kind(op)) }
	}
	if h := s.readOp(op); h != nil {
		return h
	}
	switch op {
	case "create":
		return func(ctx context.Context, b []byte) (any, error) {
			r, err := ParseCreate(b, lim)
			if err != nil {
				return nil, err
			}
			return s.Create(ctx, r)
		}
	case "deliver":
		return func(ctx context.Context, b []byte) (any, error) {
			r, err := ParseDelivery(b, lim)
			if err != nil {
				return nil, err
			}
			return s.Deliver(ctx, r)
		}
	case "input":
		return send(func(b []byte) (Request, error) { return ParseInput(b, "", lim) })
	case "authorize":
		return send(func(b []byte) (Request, error) { return ParseAuthorize(b, "", lim) })
	case "tag":
		return send(func(b []byte) (Request, error) { return ParseTag(b, "", lim) })
	case "end":
		return func(ctx context.Context, b []byte) (any, error) {
			r, err := ParseEnd(b, "", lim)
			if err != nil {
				return nil, err
			}
			return s.EndSession(ctx, r)
		}
	case "delete":
		return func(ctx context.Context, b []byte) (any, error) {
			r, err := ParseDelete(b)
			if err != nil {
				return nil, err
			}
			return s.DeleteSession(ctx, r)
		}
	}
	return send(func(b []byte) (Request, error) { return ParseControl(b, wire.Kind(op), "", lim) })
}

// readOp is the handler of a read operation (status, command, events,
// blob); nil for any other.
func (s *Server) readOp(op string) microHandler {
	switch op {
	case "status":
		return func(ctx context.Context, b []byte) (any, error) {
			r, err := ParseStatusRequest(b)
			if err != nil {
				return nil, err
			}
			if r.Alias != "" {
				return s.StatusByAlias(ctx, r.Alias)
			}
			return s.Status(ctx, r.SessionID)
		}
	case "events":
		return func(ctx context.Context, b []byte) (any, error) {
			r, err := ParseEventsRequest(b)
			if err != nil {
				return nil, err
			}
			return s.Events(ctx, r)
		}
	case "blob":
		return func(ctx context.Context, b []byte) (any, error) {
			r, err := ParseBlobRequest(b)
			if err != nil {
				return nil, err
			}
			return s.Blob(ctx, r)
		}
	case "command":
		return func(ctx context.Context, b []byte) (any, error) {
			r, err := ParseCommandRequest(b)
			if err != nil {
				return nil, err
			}
			return s.CommandOutcome(ctx, r)
		}
	}
	return nil
}

func (s *Server) serveMicro(ctx context.Context, op string, req micro.Request, h microHandler) {
	defer s.busy.begin(Pending{Via: "nats", Op: op, Path: req.Subject(), Since: s.cfg.Now()})()
	status := http.StatusOK
	out, err := h(ctx, req.Data())
	if err == nil {
		var b []byte
		if b, err = json.Marshal(out); err == nil {
			err = req.Respond(b)
		}
	}
	if err != nil {
		e := asError(err)
		status = e.Status()
		_ = req.Error(strconv.Itoa(status), strings.NewReplacer("\r", " ", "\n", " ").Replace(e.Message), e.Body())
	}
	s.met.requests.WithLabelValues("nats", op, strconv.Itoa(status)).Inc()
}

// AdminServiceName is the micro service of the operators' requests over
// NATS (<prefix>.admin.<op>, queue group <prefix>-admin), served by every
// ingress: authorization is NATS's (docs/api.md, "NATS permissions").
const AdminServiceName = "baton-admin"

// AdminOperations are the admin service's endpoints.
var AdminOperations = []string{"sessions"}

// adminService adds the admin micro service: "sessions" is the listing of
// GET /v1/admin/sessions (body: ListRequest), its reply bounded to the
// connection's maximum payload.
func (s *Server) adminService(ctx context.Context) (micro.Service, error) {
	svc, err := micro.AddService(s.cfg.NC, micro.Config{
		Name: AdminServiceName, Version: Version, QueueGroup: s.cfg.Names.AdminQueueGroup(),
		Description: "Baton operators' requests over NATS: find sessions",
		Metadata:    map[string]string{"deployment": s.cfg.Deployment, "prefix": s.cfg.Names.Prefix()},
	})
	if err != nil {
		return nil, err
	}
	h := func(ctx context.Context, req micro.Request) {
		defer s.busy.begin(Pending{Via: "nats", Op: "admin.sessions", Path: req.Subject(), Since: s.cfg.Now()})()
		status := http.StatusOK
		var b []byte
		lr, err := ParseListRequest(req.Data())
		if err == nil {
			var list SessionList
			if list, err = s.ListSessions(ctx, lr); err == nil {
				b, err = list.Bounded(s.replyBound(MaxAdminReplyBytes))
			}
		}
		if err == nil {
			err = req.Respond(b)
		}
		if err != nil {
			e := asError(err)
			status = e.Status()
			_ = req.Error(strconv.Itoa(status), strings.NewReplacer("\r", " ", "\n", " ").Replace(e.Message), e.Body())
		}
		s.met.requests.WithLabelValues("nats", "admin.sessions", strconv.Itoa(status)).Inc()
	}
	md, err := schemaMetadata("admin.sessions")
	if err == nil {
		err = svc.AddEndpoint("sessions", micro.ContextHandler(ctx, h), micro.WithEndpointSubject(s.cfg.Names.Admin("sessions")),
			micro.WithEndpointQueueGroup(s.cfg.Names.AdminQueueGroup()), micro.WithEndpointMetadata(md))
	}
	if err != nil {
		_ = svc.Stop()
		return nil, err
	}
	return svc, nil
}

// MaxAdminReplyBytes bounds an admin reply over NATS (less when the
// server's maximum payload is smaller).
const MaxAdminReplyBytes = 512 << 10

// replyBound is the largest reply over NATS: max, less when the server's
// maximum payload is smaller.
func (s *Server) replyBound(max int) int {
	bound := max
	if mp := int(s.cfg.NC.MaxPayload()); mp > 0 {
		bound = min(bound, mp-4096)
	}
	return bound
}
