package subjects

import (
	"strconv"
	"strings"
)

// Key prefixes inside the buckets. Every key is built here.
const (
	hookPrefix    = "tok."
	markerPrefix  = "handoff."
	leasePrefix   = "lease."
	indexPrefix   = "index."
	deployPrefix  = "deploy."
	agentPrefix   = "agent."
	promotePrefix = "promote."
	procPrefix    = "proc."
	delPrefix     = "deleting."
	quarPrefix    = "quarantined."
)

// StableToken is the token of a session's stable address. Session IDs are
// made of token-safe characters, so the token is the ID itself.
func StableToken(sessionID string) string { return sessionID }

// Consumer is the name of a session's inbox consumer at an epoch:
// <sessionID>-<epoch>.
func Consumer(sessionID string, epoch uint64) string {
	return sessionID + "-" + strconv.FormatUint(epoch, 10)
}

// ParseConsumer splits a consumer name into session ID and epoch.
func ParseConsumer(name string) (string, uint64, error) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return "", 0, noMatch(name)
	}
	epoch, err := strconv.ParseUint(name[i+1:], 10, 64)
	if err != nil || ValidateSessionID(name[:i]) != nil {
		return "", 0, noMatch(name)
	}
	return name[:i], epoch, nil
}

// SessionKey is a session record's key in the sessions bucket.
func SessionKey(sessionID string) string { return sessionID }

// JournalKey is the key of call n (1-based) of a step's journal in the
// journal bucket: <sessionID>.<turnID>.<step>.<n> (the machine's turn IDs,
// "t3", are valid key tokens).
func JournalKey(sessionID, turnID string, step, n int) string {
	return sessionID + "." + turnID + "." + strconv.Itoa(step) + "." + strconv.Itoa(n)
}

// HookKey is the key of an address hook in the hooks bucket: tok.<token>.
func HookKey(token string) string { return hookPrefix + token }

// HookKeys matches every hook key.
func HookKeys() string { return hookPrefix + ">" }

// ParseHookKey returns the token of a hook key.
func ParseHookKey(key string) (string, error) { return cut(key, hookPrefix) }

// MarkerKey is the key of a session's handoff marker in the hooks bucket:
// handoff.<sessionID>.
func MarkerKey(sessionID string) string { return markerPrefix + sessionID }

// MarkerKeys matches every handoff marker key.
func MarkerKeys() string { return markerPrefix + ">" }

// LeaseKey is an owner process's lease key in the owners bucket:
// lease.<processID>.
func LeaseKey(processID string) string { return leasePrefix + processID }

// LeaseKeys matches every lease key.
func LeaseKeys() string { return leasePrefix + ">" }

// ParseLeaseKey returns the process ID of a lease key.
func ParseLeaseKey(key string) (string, error) { return cut(key, leasePrefix) }

// IndexKey is one entry of a process's session index in the owners bucket:
// index.<processID>.<sessionID>.
func IndexKey(processID, sessionID string) string {
	return indexPrefix + processID + "." + sessionID
}

// IndexKeys matches every index entry of one process.
func IndexKeys(processID string) string { return indexPrefix + processID + ".>" }

// ParseIndexKey splits an index key into process ID and session ID.
func ParseIndexKey(key string) (string, string, error) {
	rest, ok := strings.CutPrefix(key, indexPrefix)
	pid, sid, found := strings.Cut(rest, ".")
	if !ok || !found || strings.ContainsAny(sid, ".*> ") || strings.ContainsAny(pid, "*> ") || pid == "" || sid == "" {
		return "", "", noMatch(key)
	}
	return pid, sid, nil
}

// ProcessKey is an owner process's registration in the owners bucket:
// proc.<deploymentID>.<processID>.
func ProcessKey(deploymentID, processID string) string {
	return procPrefix + deploymentID + "." + processID
}

// ProcessKeys matches the registrations of one deployment's processes.
func ProcessKeys(deploymentID string) string { return procPrefix + deploymentID + ".*" }

// ParseProcessKey splits a registration key into deployment and process ID.
func ParseProcessKey(key string) (string, string, error) { return cutTwo(key, procPrefix) }

// QuarantineKey is one entry of the quarantine index in the owners bucket:
// quarantined.<deploymentID>.<sessionID>, the deployment the one that
// quarantined it.
func QuarantineKey(deploymentID, sessionID string) string {
	return quarPrefix + deploymentID + "." + sessionID
}

// QuarantineKeys matches every entry of the quarantine index.
func QuarantineKeys() string { return quarPrefix + "*.*" }

// ParseQuarantineKey splits a quarantine index key into deployment and
// session ID.
func ParseQuarantineKey(key string) (string, string, error) { return cutTwo(key, quarPrefix) }

// DeletionKey is one entry of the delete index in the owners bucket:
// deleting.<sessionID>, a delete asked for and not carried out yet.
func DeletionKey(sessionID string) string { return delPrefix + sessionID }

// DeletionKeys matches every entry of the delete index.
func DeletionKeys() string { return delPrefix + "*" }

// ParseDeletionKey is the session ID of a delete index key.
func ParseDeletionKey(key string) (string, error) {
	id, ok := strings.CutPrefix(key, delPrefix)
	if !ok || id == "" || strings.ContainsAny(id, ".*> ") {
		return "", noMatch(key)
	}
	return id, nil
}

// cutTwo splits <prefix><a>.<b> into a and b, each one non-empty token.
func cutTwo(key, prefix string) (string, string, error) {
	rest, ok := strings.CutPrefix(key, prefix)
	a, b, found := strings.Cut(rest, ".")
	if !ok || !found || a == "" || b == "" || strings.ContainsAny(a, "*> ") || strings.ContainsAny(b, ".*> ") {
		return "", "", noMatch(key)
	}
	return a, b, nil
}

// DeploymentKey is a deployment record's key in the owners bucket:
// deploy.<deploymentID>.
func DeploymentKey(deploymentID string) string { return deployPrefix + deploymentID }

// DeploymentKeys matches every deployment record key.
func DeploymentKeys() string { return deployPrefix + ">" }

// ParseDeploymentKey returns the deployment ID of a deployment record key.
func ParseDeploymentKey(key string) (string, error) { return cut(key, deployPrefix) }

// AgentKey is the key of a deployment's agent in the owners bucket:
// agent.<deploymentID>. It is written once, create-only, by the first
// owner or ingress of the deployment; a deployment without one belongs to
// DefaultAgent.
func AgentKey(deploymentID string) string { return agentPrefix + deploymentID }

// AgentKeys matches every deployment's agent key.
func AgentKeys() string { return agentPrefix + ">" }

// ParseAgentKey returns the deployment ID of an agent key.
func ParseAgentKey(key string) (string, error) { return cut(key, agentPrefix) }

// PromotionKey is the key of an agent's promoted deployment in the owners
// bucket: promote.<agent>.
func PromotionKey(agent string) string { return promotePrefix + agent }

// PromotionKeys matches every promotion key.
func PromotionKeys() string { return promotePrefix + ">" }

// ParsePromotionKey returns the agent of a promotion key.
func ParsePromotionKey(key string) (string, error) { return cut(key, promotePrefix) }

func cut(key, prefix string) (string, error) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || rest == "" || strings.ContainsAny(rest, ".*> ") {
		return "", noMatch(key)
	}
	return rest, nil
}
