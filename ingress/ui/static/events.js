// How one durable event reads in the timeline: div.event[data-kind]
// [data-seq] with its kind, time and a readable summary. Kinds without a
// summary of their own (task.*, an agent's custom kinds, newer kinds)
// show their data as JSON.

import { el, json, sessionLink, timeEl, usageText } from "./dom.js";

const txt = (...parts) => parts.filter((p) => p !== undefined && p !== null && p !== "").join(" ");

function handoff(d, kind) {
  switch (kind) {
    case "handoff.completed":
      return [el("span", { class: "route" }, `${d.fromDeploymentId} → ${d.toDeploymentId}`), `, epoch ${d.epoch}`];
    case "handoff.started":
      return [el("span", { class: "route" }, `→ ${d.targetDeploymentId}`), ` staged (handoff ${d.handoffId})`];
    case "handoff.skipped":
      return [`stays on ${d.deploymentId || "its deployment"}: ${d.reason}`,
        el("span", { class: "route" }, ` (→ ${d.targetDeploymentId} skipped)`)];
    default:
      return [el("span", { class: "route" }, `→ ${d.targetDeploymentId}`), ` failed: ${d.reason}`];
  }
}

function child(d, kind) {
  const what = {
    "child.started": `started on ${d.deploymentId}`,
    "child.completed": `${d.outcome}${d.error ? `: ${d.error.code} ${d.error.message}` : ""}`,
    "child.waiting": d.requestId ? `waits for input: ${d.question || d.requestId}` : `waits for authorization ${d.attemptId}`,
    "child.closed": "closed",
  }[kind];
  return [`child ${d.handle}: `, d.childSessionId ? sessionLink(d.childSessionId) : "", " ", what];
}

function authRequested(d) {
  const url = /^https?:\/\//.test(d.url || "") ? el("a", { href: d.url, target: "_blank", rel: "noopener noreferrer" }, d.url) : d.url;
  return [txt("authorization", d.attemptId, d.provider ? `(${d.provider})` : ""), url ? " " : "", url || ""];
}

function output(d) {
  if (d.text !== undefined) return [el("div", { class: "text" }, d.text)];
  return [el("div", { class: "text ref" }, `(stored out of line${d.ref?.size ? `: ${d.ref.size} bytes` : ""})`)];
}

const summaries = {
  "session.started": (d) => txt(`on ${d.deploymentId}`, d.tokens?.length ? `addresses ${d.tokens.join(", ")}` : "", d.caller ? `for ${d.caller}` : ""),
  "command.applied": (d) => `${d.kind} (command seq ${d.seq})`,
  "turn.started": (d) => txt(`turn ${d.turnId}`, d.caller ? `for ${d.caller}` : ""),
  "turn.step": (d) => `step ${d.step}`,
  "message.output": output,
  "input.requested": (d) => [el("span", { class: "prompt" }, d.question ?? d.prompt ?? ""), ` (request ${d.requestId})`],
  "auth.requested": authRequested,
  "turn.completed": (d) => txt(d.stopReason || "done", usageText(d.usage) !== "—" ? `· ${usageText(d.usage)}` : ""),
  "turn.cancelled": (d) => txt("cancelled", d.commandId ? `by command ${d.commandId}` : ""),
  "session.waiting": (d) => `waits for ${d.reason}`,
  "session.paused": () => "paused by an operator",
  "session.resumed": () => "resumed by an operator",
  "session.ended": (d) => txt(`ended: ${d.reason}`, d.by ? `by ${d.by}` : "", d.message ? `(${d.message})` : ""),
  "session.quarantined": (d) => `quarantined on ${d.deploymentId} after ${d.attempts} attempts: ${d.error}`,
  "session.retried": (d) => `retried on ${d.deploymentId}`,
  "limit.reached": (d) => `${d.limit}: ${d.used} of ${d.max}`,
  "step.interrupted": (d) => txt(`step ${d.step} interrupted`, d.reason ? `: ${d.reason}` : ""),
  error: (d) => [el("span", { class: "error-code" }, d.code || "error"), `: ${d.message}`, d.step ? ` (step ${d.step})` : ""],
};

// summary is the readable part of an event.
export function summary(ev) {
  const d = ev.data || {};
  if (ev.kind.startsWith("handoff.")) return handoff(d, ev.kind);
  if (ev.kind.startsWith("child.")) return child(d, ev.kind);
  const f = summaries[ev.kind];
  return f ? [f(d)].flat() : [json(d)];
}

// MINOR are the bookkeeping kinds, shown on one muted line.
const MINOR = ["command.applied", "turn.started", "turn.step", "session.waiting", "session.tagged"];

// renderEvent is div.event for one durable event envelope.
export function renderEvent(ev) {
  const cls = ["event"];
  if (ev.kind.startsWith("handoff.")) cls.push("handoff");
  if (ev.kind === "error" || ev.kind === "command.rejected" || ev.kind === "wire.rejected") cls.push("error");
  if (ev.kind === "message.output") cls.push("output");
  if (MINOR.includes(ev.kind)) cls.push("minor");
  return el("div", { class: cls.join(" "), "data-kind": ev.kind, "data-seq": String(ev.seq) },
    el("div", { class: "head" }, el("span", { class: "seq" }, `#${ev.seq}`), " ",
      el("span", { class: "kind" }, ev.kind), " ", timeEl(ev.time)),
    el("div", { class: "summary" }, summary(ev)));
}
