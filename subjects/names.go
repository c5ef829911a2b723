package subjects

import (
	"strings"
)

// DefaultPrefix is the default name prefix.
const DefaultPrefix = "baton"

// Names builds every stream, bucket and subject name under one prefix. The
// zero value is not usable; use New or Default.
type Names struct {
	prefix string
	upper  string
}

// New returns the names under prefix (validated by ValidatePrefix).
func New(prefix string) (Names, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return Names{}, err
	}
	return Names{prefix: prefix, upper: strings.ToUpper(prefix)}, nil
}

// Default returns the names under DefaultPrefix.
func Default() Names {
	n, _ := New(DefaultPrefix)
	return n
}

// Prefix returns the prefix, e.g. "baton".
func (n Names) Prefix() string { return n.prefix }

// InboxStream is the stream holding every session command: BATON_INBOX.
func (n Names) InboxStream() string { return n.upper + "_INBOX" }

// EventsStream is the public session event stream: BATON_EVENTS.
func (n Names) EventsStream() string { return n.upper + "_EVENTS" }

// TasksStream is the stream of background tasks: BATON_TASKS.
func (n Names) TasksStream() string { return n.upper + "_TASKS" }

// SessionsBucket is the KV bucket of session records: baton_sessions.
func (n Names) SessionsBucket() string { return n.prefix + "_sessions" }

// HooksBucket is the KV bucket of address hooks and handoff markers: baton_hooks.
func (n Names) HooksBucket() string { return n.prefix + "_hooks" }

// OwnersBucket is the KV bucket of leases, session indexes and deployment
// records: baton_owners.
func (n Names) OwnersBucket() string { return n.prefix + "_owners" }

// JournalBucket is the KV bucket of steps' journals (durable effects):
// baton_journal.
func (n Names) JournalBucket() string { return n.prefix + "_journal" }

// ReceiptsBucket is the KV bucket of the ingress's idempotency receipts:
// baton_receipts.
func (n Names) ReceiptsBucket() string { return n.prefix + "_receipts" }

// BlobsBucket is the KV bucket of the blob inventory: which blobs of the
// state object store each session owns or refers to (baton_blobs).
func (n Names) BlobsBucket() string { return n.prefix + "_blobs" }

// StateBucket is the object store for large session state: baton_state.
func (n Names) StateBucket() string { return n.prefix + "_state" }

// Inbox is the inbox subject of one encoded token: baton.inbox.<token>.
func (n Names) Inbox(token string) string { return n.prefix + ".inbox." + token }

// InboxAll matches every inbox subject: baton.inbox.>.
func (n Names) InboxAll() string { return n.prefix + ".inbox.>" }

// Sched is the schedule subject of a session's timer: baton.sched.<sessionID>.
func (n Names) Sched(sessionID string) string { return n.prefix + ".sched." + sessionID }

// SchedDebounce is the schedule subject of a session's debounce window:
// baton.sched.<sessionID>.debounce (the lifetime timer keeps Sched).
func (n Names) SchedDebounce(sessionID string) string { return n.Sched(sessionID) + ".debounce" }

// SchedAll matches every schedule subject: baton.sched.>.
func (n Names) SchedAll() string { return n.prefix + ".sched.>" }

// Events is a session's event subject: baton.events.<sessionID>.
func (n Names) Events(sessionID string) string { return n.prefix + ".events." + sessionID }

// EventsAll matches every event subject: baton.events.>.
func (n Names) EventsAll() string { return n.prefix + ".events.>" }

// Live is a session's live subject: baton.live.<sessionID>, core NATS
// only (no stream captures it). A step's deltas (message.delta) and
// discards (message.discarded) go there; the ingress forwards them to SSE.
func (n Names) Live(sessionID string) string { return n.prefix + ".live." + sessionID }

// Tasks is a deployment's task subject: baton.tasks.<deploymentID>.
func (n Names) Tasks(deploymentID string) string { return n.prefix + ".tasks." + deploymentID }

// TasksAll matches every task subject: baton.tasks.>.
func (n Names) TasksAll() string { return n.prefix + ".tasks.>" }

// Start is the request subject that starts a session or a handoff successor
// on exactly one deployment: baton.deploy.<deploymentID>.start.
func (n Names) Start(deploymentID string) string {
	return n.prefix + ".deploy." + deploymentID + ".start"
}

// Wake is the request subject that loads a hibernated session on a
// deployment: baton.deploy.<deploymentID>.wake.
func (n Names) Wake(deploymentID string) string {
	return n.prefix + ".deploy." + deploymentID + ".wake"
}

// Finish is the request subject on which a deployment's pool carries out
// an operator's finish of a quarantined session:
// baton.deploy.<deploymentID>.finish.
func (n Names) Finish(deploymentID string) string {
	return n.prefix + ".deploy." + deploymentID + ".finish"
}

// FinishAny is the finish subject every owner of every deployment serves
// (queue group FinishQueueGroup), for a session whose deployment has no
// live owner: baton.finish.
func (n Names) FinishAny() string { return n.prefix + ".finish" }

// FinishQueueGroup is the queue group of FinishAny.
func (n Names) FinishQueueGroup() string { return n.prefix + "-finish" }

// QueueGroup is the queue group of a deployment's owner pool.
func (n Names) QueueGroup(deploymentID string) string {
	return n.prefix + "-owner-" + deploymentID
}

// Admin is the subject of an operator's request over NATS:
// <prefix>.admin.<op> (served by every ingress in one queue group).
func (n Names) Admin(op string) string { return n.prefix + ".admin." + op }

// AdminQueueGroup is the queue group of the admin subjects.
func (n Names) AdminQueueGroup() string { return n.prefix + "-admin" }

// Ingress is the subject of one ingress operation: baton.ingress.<op>.
func (n Names) Ingress(op string) string { return n.prefix + ".ingress." + op }

// AgentIngress is the subject of an ingress operation for one agent's
// ingresses only: <prefix>.ingress.<agent>.<op>. The un-prefixed Ingress
// subjects are served by the default agent's ingresses alone (deprecated).
func (n Names) AgentIngress(agent, op string) string {
	return n.prefix + ".ingress." + agent + "." + op
}

// KVSubject is the raw subject behind a KV key: $KV.<bucket>.<key>.
func KVSubject(bucket, key string) string { return "$KV." + bucket + "." + key }

// ParseInbox returns the token of an inbox subject.
func (n Names) ParseInbox(subject string) (string, error) {
	return n.parseOne(subject, ".inbox.")
}

// ParseSched returns the session ID of a schedule subject.
func (n Names) ParseSched(subject string) (string, error) {
	return n.parseOne(subject, ".sched.")
}

// ParseEvents returns the session ID of an event subject.
func (n Names) ParseEvents(subject string) (string, error) {
	return n.parseOne(subject, ".events.")
}

// ParseTasks returns the deployment ID of a task subject.
func (n Names) ParseTasks(subject string) (string, error) {
	return n.parseOne(subject, ".tasks.")
}

func (n Names) parseOne(subject, mid string) (string, error) {
	rest, ok := strings.CutPrefix(subject, n.prefix+mid)
	if !ok || rest == "" || strings.ContainsAny(rest, ".*> \t\r\n") {
		return "", noMatch(subject)
	}
	return rest, nil
}

func noMatch(s string) error { return &matchError{s} }

type matchError struct{ s string }

func (e *matchError) Error() string { return ErrNoMatch.Error() + ": " + e.s }
func (e *matchError) Unwrap() error { return ErrNoMatch }

// Remote agents (docs/agent.md, "Writing an agent in another language"):
// the step protocol of a deployment whose owners run no agent code.

// AgentStep is the request subject of a remote deployment's steps, which
// its workers subscribe to in a queue group: baton.agent.<deploymentID>.step.
func (n Names) AgentStep(deploymentID string) string { return n.agent(deploymentID) + ".step" }

// AgentHistory is the request subject a worker pages a step's history
// (and any other part sent by reference) from:
// baton.agent.<deploymentID>.history.
func (n Names) AgentHistory(deploymentID string) string { return n.agent(deploymentID) + ".history" }

// AgentDelta is the subject a worker publishes one step's live output
// deltas on: baton.agent.<deploymentID>.delta.<stepToken>.
func (n Names) AgentDelta(deploymentID, token string) string {
	return n.agent(deploymentID) + ".delta." + token
}

// AgentHeartbeat is the subject a worker publishes one step's heartbeats
// on: baton.agent.<deploymentID>.heartbeat.<stepToken>.
func (n Names) AgentHeartbeat(deploymentID, token string) string {
	return n.agent(deploymentID) + ".heartbeat." + token
}

// AgentJournal is the request subject of one step's journaled calls:
// baton.agent.<deploymentID>.journal.<stepToken>.
func (n Names) AgentJournal(deploymentID, token string) string {
	return n.agent(deploymentID) + ".journal." + token
}

// AgentCancel is the subject the owner cancels one step on:
// baton.agent.<deploymentID>.cancel.<stepToken>.
func (n Names) AgentCancel(deploymentID, token string) string {
	return n.agent(deploymentID) + ".cancel." + token
}

// AgentReply is the reply subject of one step request:
// baton.agent.<deploymentID>.reply.<stepToken>. A worker answers it
// through its permission to respond (allow_responses), never by name.
func (n Names) AgentReply(deploymentID, token string) string {
	return n.agent(deploymentID) + ".reply." + token
}

// AgentStepTraffic matches everything a step's worker sends the owner
// (deltas, heartbeats, journal requests, the reply):
// baton.agent.<deploymentID>.*.<stepToken>.
func (n Names) AgentStepTraffic(deploymentID, token string) string {
	return n.agent(deploymentID) + ".*." + token
}

// AgentWorkerInbox is the inbox prefix a permissioned worker connects
// with, so the replies to its own journal and history requests reach it
// without a permission on _INBOX.>: baton.agent.<deploymentID>.inbox.
func (n Names) AgentWorkerInbox(deploymentID string) string { return n.agent(deploymentID) + ".inbox" }

// AgentQueueGroup is the queue group a deployment's workers share.
func (n Names) AgentQueueGroup(deploymentID string) string {
	return n.prefix + "-agent-" + deploymentID
}

func (n Names) agent(deploymentID string) string { return n.prefix + ".agent." + deploymentID }
