// Small DOM helpers shared by the views. Text is always set as text,
// never parsed as HTML.

// el builds an element: props are attributes (class, data-*, …; false,
// null and undefined are left out, true is an empty attribute), "on…"
// props are listeners; children are nodes or strings.
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  append(e, children);
  return e;
}

function append(parent, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false || c === "") continue;
    parent.append(c instanceof Node ? c : String(c));
  }
}

// ago is how long ago an ISO time was, e.g. "5s ago" ("—" for none).
export function ago(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (!iso || Number.isNaN(t) || t <= 0) return "—";
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 48 * 3600) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

// until is how long until an ISO time, e.g. "in 12s".
export function until(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (!iso || Number.isNaN(t)) return "—";
  const s = Math.round((t - now) / 1000);
  return s < 0 ? "expired" : s < 120 ? `in ${s}s` : `in ${Math.round(s / 60)}m`;
}

// isoOf is the canonical ISO form of a time ("" for none).
export function isoOf(iso) {
  const t = Date.parse(iso);
  return !iso || Number.isNaN(t) || t <= 0 ? "" : new Date(t).toISOString();
}

// agoProps are the attributes of an element that shows a relative time:
// its title is the ISO time, and tick keeps its text current.
export function agoProps(iso) {
  const at = isoOf(iso);
  return at ? { title: at, "data-ago": at } : {};
}

// timeEl is a <time> showing how long ago iso was.
export function timeEl(iso, cls = "time") {
  const at = isoOf(iso);
  return el("time", { class: cls, datetime: at || false, ...agoProps(iso) }, ago(iso));
}

// tick refreshes every relative time on the page.
export function tick() {
  const now = Date.now();
  for (const e of document.querySelectorAll("[data-ago]")) e.textContent = ago(e.dataset.ago, now);
}

// stateBadge is span.state.state-<state>, coloured by state.
export function stateBadge(state) {
  const s = state || "unknown";
  return el("span", { class: `state state-${s}` }, s);
}

// sessionLink is a link to a session's page.
export function sessionLink(id, text = id) {
  return el("a", { href: "#/session/" + encodeURIComponent(id), class: "session-link" }, text);
}

// dash stands for "nothing".
export const dash = "—";

// json is a compact, readable JSON rendering of v.
export function json(v) {
  return el("pre", { class: "json" }, JSON.stringify(v, null, 1).replace(/\n\s*/g, " "));
}

// viewError is what a view shows when its load failed: never a blank page.
export function viewError(err) {
  return el("p", { class: "view-error" }, "Could not load: ",
    el("strong", { class: "code" }, err.code || "error"), " ", el("span", { class: "message" }, err.message || ""));
}

// usageText is "120 in / 45 out" for a usage, or "—".
export function usageText(u) {
  if (!u || (!u.inputTokens && !u.outputTokens)) return dash;
  let t = `${u.inputTokens || 0} in / ${u.outputTokens || 0} out`;
  if (u.costUsd) t += ` · $${u.costUsd.toFixed(4)}`;
  return t;
}

// WHY explains a not-idle reason.
export const WHY = {
  busy: "a step is running or due",
  queued: "commands are queued, not yet applied",
  input: "waits for a human's input",
  authorization: "waits for an authorization callback",
  task: "waits for a background task",
  child: "waits for a child session",
  paused: "paused by an operator",
  quarantined: "quarantined: no owner runs it (retry or end it)",
  handoff: "mid-handoff",
  ended: "ended",
};

// whyEl is span.why holding the reason code, explained in its title.
export function whyEl(why) {
  return el("span", { class: "why", title: WHY[why] || false }, why);
}
