// A session's status, section#status: GET /v1/sessions/<id> as a
// definition list of dd[data-field=…].

import { el, dash, sessionLink, stateBadge, timeEl, usageText, whyEl } from "./dom.js";

function waitItem(w) {
  const detail = {
    input: () => [w.question ? `"${w.question}"` : "", w.requestId ? ` (request ${w.requestId})` : ""],
    authorization: () => [` attempt ${w.attemptId || ""}`],
    task: () => [` ${w.taskKind || "task"} ${w.taskId || ""}`],
    child: () => [" ", w.sessionId ? sessionLink(w.sessionId) : ""],
    debounce: () => [" until ", w.until ? timeEl(w.until) : dash],
  }[w.kind];
  return el("li", { "data-kind": w.kind }, el("strong", {}, w.kind), " ", detail ? detail() : []);
}

function list(items, render) {
  return items && items.length ? el("ul", { class: "plain" }, items.map(render)) : dash;
}

function handleItem(h) {
  return el("li", { "data-handle": h.handle }, el("strong", {}, h.handle), ` ${h.state} `,
    h.childSessionId ? sessionLink(h.childSessionId) : "(no child yet)", h.deploymentId ? ` on ${h.deploymentId}` : "");
}

function quarantine(q) {
  if (!q) return dash;
  return [`after ${q.attempts} attempts: `, el("code", {}, q.error), " since ", timeEl(q.since)];
}

function tags(t) {
  const keys = Object.keys(t || {});
  return keys.length ? keys.sort().map((k) => el("span", { class: "tag" }, `${k}:${t[k]}`)) : dash;
}

const or = (v) => (v === undefined || v === null || v === "" ? dash : String(v));

// FIELDS are the status's rows: the field name and how it reads.
const FIELDS = [
  ["state", "State", (s) => stateBadge(s.state)],
  ["deploymentId", "Deployment", (s) => or(s.deploymentId)],
  ["epoch", "Epoch", (s) => or(s.epoch)],
  ["ownerProcess", "Owner process", (s) => or(s.ownerProcess)],
  ["ownerLive", "Owner live", (s) => (s.ownerLive ? "yes" : "no: nothing acts on a command now")],
  ["idle", "Idle", (s) => (s.idle ? "yes" : "no")],
  ["why", "Why not idle", (s) => (s.why ? whyEl(s.why) : dash)],
  ["queueDepth", "Queued commands", (s) => or(s.queueDepth)],
  ["waitingFor", "Waiting for", (s) => list(s.waitingFor, waitItem)],
  ["handles", "Child handles", (s) => list(s.handles, handleItem)],
  ["quarantine", "Quarantine", (s) => quarantine(s.quarantine)],
  ["parentSessionId", "Parent", (s) => (s.parentSessionId ? [sessionLink(s.parentSessionId), ` (depth ${s.depth})`] : dash)],
  ["eventSeq", "Last event", (s) => or(s.eventSeq)],
  ["usage", "Usage", (s) => usageText(s.usage)],
  ["tokens", "Addresses", (s) => or((s.tokens || []).join(", "))],
  ["tags", "Tags", (s) => tags(s.tags)],
];

// statusSection is section#status, its fields empty until render.
export function statusSection() {
  return el("section", { id: "status", class: "card" }, el("h2", {}, "Status"),
    el("dl", {}, FIELDS.map(([f, label]) => [el("dt", {}, label), el("dd", { "data-field": f }, dash)])));
}

// renderStatus fills section#status with a status.
export function renderStatus(section, st) {
  for (const [f, , render] of FIELDS) {
    const dd = section.querySelector(`dd[data-field="${f}"]`);
    dd.replaceChildren(...[render(st)].flat().filter((c) => c !== "" && c !== null).map((c) => (c instanceof Node ? c : String(c))));
  }
  section.dataset.state = st.state;
}
