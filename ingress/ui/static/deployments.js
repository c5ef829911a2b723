// Agents and deployments (#/deployments): GET /v1/admin/agents and the
// drain report GET /v1/admin/deployments (every page) — what is promoted,
// who owns what, what each deployment's owners read, how many sessions it
// holds by state, and why each of its busy sessions has not moved.

import { act, get, hideError, seg } from "./api.js";
import { el, WHY, dash, sessionLink, stateBadge, until, viewError, whyEl } from "./dom.js";

const STATES = ["active", "handoff", "hibernated", "paused", "ended", "quarantined"];
const MAX_PAGES = 20;

// drainReport reads the report's pages and merges them by deployment.
async function drainReport() {
  const deps = new Map();
  let after = "";
  let pages = 0;
  do {
    const page = await get("/v1/admin/deployments" + (after ? "?after=" + encodeURIComponent(after) : ""), { admin: true });
    for (const d of page.deployments || []) {
      const have = deps.get(d.deploymentId);
      if (!have) deps.set(d.deploymentId, { ...d, notIdle: [...(d.notIdle || [])] });
      else {
        have.notIdle.push(...(d.notIdle || []));
        have.idle = (have.idle || 0) + (d.idle || 0);
      }
    }
    after = page.next || "";
    pages++;
  } while (after && pages < MAX_PAGES);
  return { deps, truncated: Boolean(after) };
}

// group is the agents by name, each with its deployments (the report's
// entry and the agents view's) by ID.
function group(agents, deps) {
  const byName = new Map();
  const agent = (name) => {
    if (!byName.has(name)) byName.set(name, { name, view: null, deps: new Map() });
    return byName.get(name);
  };
  for (const a of agents.agents || []) {
    const g = agent(a.agent);
    g.view = a;
    for (const d of a.deployments || []) g.deps.set(d.deploymentId, { id: d.deploymentId, view: d, report: null });
  }
  for (const r of deps.values()) {
    const g = agent(r.agent || "(unknown)");
    const d = g.deps.get(r.deploymentId) || { id: r.deploymentId, view: null };
    d.report = r;
    g.deps.set(r.deploymentId, d);
  }
  return [...byName.values()].sort((a, b) => a.name.localeCompare(b.name));
}

function counts(sessions) {
  return el("div", { class: "counts" }, STATES.map((st) =>
    el("span", { class: `count state-${st}`, "data-state": st, title: st }, `${st} ${(sessions || {})[st] || 0}`)));
}

function owners(d) {
  const list = d.report?.owners;
  if (list) {
    return el("div", { class: "owners" }, "Owners: ", list.length ? list.map((o) =>
      el("span", { class: "owner" }, o.processId, o.leaseExpiresAt ? ` (lease ${until(o.leaseExpiresAt)})` : "")) : "none live");
  }
  return el("div", { class: "owners" }, `Owners: ${d.view?.ownersLive || 0} live`);
}

function versions(r) {
  if (!r) return el("div", { class: "versions" }, "Versions: ", dash);
  const inbox = r.inboxVersions || [];
  const state = r.stateVersions || [];
  return el("div", { class: "versions" }, "Advertised: inbox ", inbox.length ? inbox.join(", ") : "none (1)",
    " · state ", state.length ? state.join(", ") : dash);
}

function notIdleItem(s) {
  return el("li", { class: "not-idle-session", "data-id": s.sessionId }, sessionLink(s.sessionId), " ", stateBadge(s.state), " ",
    whyEl(s.why), " ", el("span", { class: "hint" }, WHY[s.why] || ""),
    el("span", { class: "detail" }, ` · epoch ${s.epoch}`, s.ownerProcess ? ` · on ${s.ownerProcess}` : ""),
    s.parentSessionId ? [" · child of ", sessionLink(s.parentSessionId)] : "",
    s.children?.length ? [" · waits for ", s.children.map((c) => [sessionLink(c), " "])] : "");
}

function deployment(agentName, d, promotedId, reload) {
  const r = d.report;
  const promoted = r ? r.promoted : promotedId === d.id;
  const retired = Boolean(r ? r.retired : d.view?.retired);
  const cls = ["deployment", "card", promoted && "promoted", retired && "retired"].filter(Boolean).join(" ");
  const run = (action, method, path, body) => async () => {
    if (await act(action, method, path, { admin: true, body })) reload();
  };
  const notIdle = r?.notIdle || [];
  return el("div", { class: cls, "data-deployment": d.id },
    el("h3", {}, el("code", {}, d.id), promoted ? el("span", { class: "badge promoted" }, "promoted") : "",
      retired ? el("span", { class: "badge retired" }, "retired") : ""),
    owners(d), versions(r), counts(r?.sessions || d.view?.sessions),
    el("div", { class: "not-idle-head" }, `Not idle: ${notIdle.length}`, r ? ` · idle: ${r.idle || 0}` : ""),
    el("ul", { class: "not-idle" }, notIdle.map(notIdleItem)),
    el("div", { class: "row" },
      el("button", { type: "button", class: "promote", disabled: promoted,
        title: promoted ? "Promoted already" : "Make the agent's ingresses stamp this deployment",
        onclick: run("promote", "POST", `/v1/admin/agents/${seg(agentName)}/promote`, { deploymentId: d.id }) }, "Promote"),
      retired
        ? el("button", { type: "button", class: "unretire", onclick: run("unretire", "POST", `/v1/admin/deployments/${seg(d.id)}/unretire`) }, "Unretire")
        : el("button", { type: "button", class: "retire", onclick: run("retire", "POST", `/v1/admin/deployments/${seg(d.id)}/retire`) }, "Retire")));
}

function agentEl(g, reload) {
  const v = g.view;
  const info = v?.promoted
    ? ["promoted: ", el("code", {}, v.promoted), ` (revision ${v.promotionRevision})`]
    : "none promoted: each ingress stamps its own deployment";
  const deps = [...g.deps.values()].sort((a, b) => a.id.localeCompare(b.id));
  return el("div", { class: "agent", "data-agent": g.name }, el("h2", {}, g.name),
    el("p", { class: "agent-info" }, info), v?.sessions ? counts(v.sessions) : "",
    deps.map((d) => deployment(g.name, d, v?.promoted, reload)));
}

// mount renders the agents and deployments into root.
export function mount(root) {
  const section = el("section", { id: "agents", "data-loaded": "false" });
  const problem = el("div", { class: "problem" });
  const note = el("p", { class: "note", hidden: true });
  let generation = 0;

  async function load() {
    const mine = ++generation;
    section.dataset.loaded = "false";
    try {
      const [agents, { deps, truncated }] = await Promise.all([get("/v1/admin/agents", { admin: true }), drainReport()]);
      if (mine !== generation) return;
      section.replaceChildren(...group(agents, deps).map((g) => agentEl(g, load)));
      note.textContent = truncated ? `The drain report has more than ${MAX_PAGES} pages: the not-idle lists are cut short.` : "";
      note.hidden = !truncated;
      problem.replaceChildren();
      hideError();
    } catch (e) {
      if (mine !== generation) return;
      section.replaceChildren();
      problem.replaceChildren(viewError(e));
    } finally {
      if (mine === generation) section.dataset.loaded = "true";
    }
  }

  root.append(el("h1", {}, "Agents and deployments"), problem, note, section);
  load();
  return { refresh: load, unmount() { generation++; } };
}
