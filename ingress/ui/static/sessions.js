// The sessions index (#/): GET /v1/admin/sessions with the filters of
// form#filters, a page at a time; q opens a session by ID or alias.

import { ApiError, call, get, hideError, seg, showError } from "./api.js";
import { el, ago, agoProps, stateBadge, sessionLink, dash, usageText, viewError, whyEl } from "./dom.js";

const STATES = ["", "active", "handoff", "hibernated", "paused", "ended", "quarantined"];
const WAITS = ["", "input", "authorization", "task", "child", "paused", "quarantined", "handoff", "step"];
// The waits the listing filters on itself; the others are a state's
// (paused, quarantined, handoff) or transient (step): the page is
// filtered here.
const SERVER_WAITS = ["input", "authorization", "task", "child"];
const PAGE = 50;

// The filters outlive the view: back from a session, the list is as left.
const filters = { agent: "", deployment: "", state: "", tag: "", waiting: "", q: "" };

// listQuery is the listing's query for the filters and a cursor, and the
// wait kind the page must still be filtered on ("" for none).
export function listQuery(f, cursor) {
  const q = new URLSearchParams();
  let local = "";
  for (const k of ["agent", "deployment", "state"]) if (f[k]) q.set(k, f[k].trim());
  if (f.tag) q.append("tag", f.tag.trim());
  if (SERVER_WAITS.includes(f.waiting)) q.set("waiting", f.waiting);
  else if (f.waiting) {
    local = f.waiting;
    if (!f.state) q.set("state", f.waiting === "step" ? "active" : f.waiting);
  }
  q.set("limit", String(PAGE));
  if (cursor) q.set("cursor", cursor);
  return { query: q.toString(), local };
}

function field(name, label, input) {
  input.name = name;
  input.value = filters[name];
  return el("label", { class: "field" }, label, input);
}

function select(values) {
  return el("select", {}, values.map((v) => el("option", { value: v }, v || "any")));
}

function filtersForm(onApply, onSearch) {
  const q = el("input", { type: "search", placeholder: "session ID or alias", spellcheck: "false" });
  q.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      e.preventDefault();
      onSearch();
    }
  });
  const form = el("form", { id: "filters", class: "filters", autocomplete: "off" },
    field("agent", "Agent", el("input", { type: "text", placeholder: "default" })),
    field("deployment", "Deployment", el("input", { type: "text", placeholder: "v1" })),
    field("state", "State", select(STATES)),
    field("tag", "Tag", el("input", { type: "text", placeholder: "key:value" })),
    field("waiting", "Waiting for", select(WAITS)),
    el("button", { id: "apply", type: "submit" }, "Apply"),
    el("span", { class: "spacer" }),
    field("q", "Open", q),
    el("button", { id: "search", type: "button", onclick: onSearch }, "Open"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    onApply();
  });
  return form;
}

function readForm(form) {
  for (const k of Object.keys(filters)) filters[k] = form.elements[k].value.trim();
}

function row(s) {
  const kinds = (s.waitingFor || []).map((w) => w.kind);
  return el("tr", { class: "session", "data-id": s.sessionId },
    el("td", { class: "id" }, sessionLink(s.sessionId), s.aliases?.length ? el("div", { class: "aliases" }, s.aliases.join(", ")) : null),
    el("td", { class: "state" }, stateBadge(s.state)),
    el("td", { class: "agent" }, s.agent || dash),
    el("td", { class: "deployment" }, s.deploymentId || dash),
    el("td", { class: "waiting" }, el("span", { class: "kinds" }, kinds.length ? kinds.join(", ") : dash),
      !s.idle && s.why ? [" ", whyEl(s.why)] : null),
    el("td", { class: "activity", ...agoProps(s.lastActivityAt) }, ago(s.lastActivityAt)),
    el("td", { class: "usage" }, usageText(s.usage)));
}

function table() {
  const head = ["Session", "State", "Agent", "Deployment", "Waiting for", "Last activity", "Tokens"];
  return el("table", { id: "sessions", class: "list", "data-loaded": "false" },
    el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))), el("tbody"));
}

// search finds the session q names: its ID (a deleted one too: its page
// says so), else its alias; null, with #error shown, when none matches.
async function search(q) {
  if (!q) {
    showError(new ApiError(0, "bad_request", "enter a session ID or an alias to open"));
    return null;
  }
  if (/^[A-Za-z0-9_-]{1,128}$/.test(q)) {
    try {
      await call("GET", "/v1/sessions/" + seg(q), { quiet: true });
      return q;
    } catch (e) {
      if (e.status === 410) return q;
      if (e.status !== 404 && e.status !== 400) {
        showError(e);
        return null;
      }
    }
  }
  const st = await get("/v1/sessions?alias=" + encodeURIComponent(q)).catch(() => null);
  return st ? st.sessionId : null;
}

// mount renders the sessions index into root.
export function mount(root) {
  const tbl = table();
  const empty = el("p", { id: "sessions-empty", class: "empty", hidden: true }, "No sessions on this page.");
  const problem = el("div", { class: "problem" });
  const first = el("button", { id: "first", type: "button" }, "First page");
  const next = el("button", { id: "next", type: "button", disabled: true }, "Next page");
  let cursor = "";
  let nextCursor = "";
  let generation = 0;

  async function load(c) {
    const mine = ++generation;
    tbl.dataset.loaded = "false";
    const { query, local } = listQuery(filters, c);
    try {
      const page = await get("/v1/admin/sessions?" + query, { admin: true });
      if (mine !== generation) return;
      const rows = (page.sessions || []).filter((s) => !local || (s.waitingFor || []).some((w) => w.kind === local));
      tbl.tBodies[0].replaceChildren(...rows.map(row));
      cursor = c;
      nextCursor = page.next || "";
      problem.replaceChildren();
      hideError();
    } catch (e) {
      if (mine !== generation) return;
      tbl.tBodies[0].replaceChildren();
      nextCursor = "";
      problem.replaceChildren(viewError(e));
    } finally {
      if (mine === generation) {
        next.disabled = !nextCursor;
        empty.hidden = tbl.tBodies[0].rows.length > 0;
        tbl.dataset.loaded = "true";
      }
    }
  }

  const form = filtersForm(() => {
    readForm(form);
    load("");
  }, async () => {
    readForm(form);
    const id = await search(filters.q);
    if (id) location.hash = "#/session/" + encodeURIComponent(id);
  });
  first.addEventListener("click", () => load(""));
  next.addEventListener("click", () => nextCursor && load(nextCursor));
  root.append(el("h1", {}, "Sessions"), form, problem, tbl, empty, el("div", { class: "pager" }, first, next));
  load("");
  return { refresh: () => load(cursor), unmount() { generation++; } };
}
