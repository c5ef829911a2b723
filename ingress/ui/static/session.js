// One session (#/session/<id>): its status, the live timeline, the
// human-in-the-loop forms, the composer and the user's and the operator's
// actions.

import { act, get, hideError, seg } from "./api.js";
import { el, viewError } from "./dom.js";
import { renderHitl } from "./hitl.js";
import { renderStatus, statusSection } from "./status.js";
import { openStream } from "./stream.js";
import { Timeline } from "./timeline.js";

const MODES = ["", "queue", "steer", "reject", "interrupt", "rollback", "debounce", "latest"];

function button(id, label, title, fn) {
  const b = el("button", { id, type: "button", title });
  b.textContent = label;
  b.addEventListener("click", async () => {
    b.disabled = true;
    try {
      await fn();
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

function actionsSection(id, after) {
  const user = `/v1/sessions/${seg(id)}`;
  const admin = `/v1/admin/sessions/${seg(id)}`;
  const adminAct = (name) => async () => {
    await act(name, "POST", `${admin}/${name}`, { admin: true });
    after();
  };
  const move = el("form", { id: "move", class: "row", autocomplete: "off" },
    el("input", { name: "deploymentId", type: "text", placeholder: "deployment ID", spellcheck: "false" }),
    el("button", { type: "submit" }, "Move"));
  move.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { deploymentId: move.elements.deploymentId.value.trim() };
    await act("move", "POST", `${admin}/move`, { admin: true, body });
    after();
  });
  return el("section", { id: "actions", class: "card" }, el("h2", {}, "Actions"),
    el("div", { class: "row" },
      button("end", "End", "End the session (POST …/end)", async () => {
        await act("end", "POST", `${user}/end`);
        after();
      }),
      button("delete", "Delete", "Delete the ended session and everything it stored", async () => {
        if (!window.confirm(`Delete session ${id}? Its events and stored content are removed for good.`)) return;
        await act("delete", "DELETE", user);
      })),
    el("h3", {}, "Operator (admin token)"),
    el("div", { class: "row" },
      button("pause", "Pause", "Pause: the owner applies nothing until resumed", adminAct("pause")),
      button("resume", "Resume", "Resume a paused session", adminAct("resume")),
      button("release", "Release", "Fenced takeover of a wedged session: another owner claims it", adminAct("release")),
      button("retry", "Retry", "Retry a quarantined session", adminAct("retry"))),
    move);
}

function composerForm(id, after) {
  const form = el("form", { id: "composer", class: "card composer", autocomplete: "off" },
    el("textarea", { name: "text", rows: "3", placeholder: "Send a message (Ctrl+Enter)" }),
    el("div", { class: "row" },
      el("label", {}, "Mode ", el("select", { name: "mode" }, MODES.map((m) => el("option", { value: m }, m || "session default")))),
      el("label", { class: "debounce" }, "Debounce window ", el("input", { name: "debounce", type: "text", placeholder: "3s", size: "5" })),
      el("button", { type: "submit" }, "Send")));
  const { text, mode, debounce } = form.elements;
  const showWindow = () => form.classList.toggle("with-debounce", mode.value === "debounce");
  mode.addEventListener("change", showWindow);
  showWindow();
  text.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { sessionId: id, text: text.value };
    if (mode.value) body.mode = mode.value;
    if (mode.value === "debounce" && debounce.value.trim()) body.debounce = debounce.value.trim();
    const r = await act("deliver", "POST", "/v1/deliveries", { body });
    if (r) {
      text.value = "";
      form.dataset.lastSeq = String(r.data.seq);
    }
    after();
  });
  return form;
}

// mount renders session id into root.
export function mount(root, id) {
  const problem = el("div", { class: "problem" });
  const status = statusSection();
  const hitl = el("section", { id: "hitl", class: "card", hidden: true }, el("h2", {}, "Waiting for you"));
  const section = el("section", { id: "timeline", class: "timeline" });
  const tl = new Timeline(section);
  let stream = null;
  let gone = false;
  let soon = 0;

  async function load(byUser) {
    try {
      const st = await get(`/v1/sessions/${seg(id)}`);
      if (gone) return null;
      renderStatus(status, st);
      renderHitl(hitl, id, st, later);
      problem.replaceChildren();
      if (byUser) hideError();
      if (st.eventSeq > tl.last) setTimeout(() => stream && tl.last < st.eventSeq && stream.fill(), 1500);
      return st;
    } catch (e) {
      if (!gone) problem.replaceChildren(viewError(e));
      return null;
    }
  }
  // later refreshes the status soon: after each durable event and action.
  function later() {
    clearTimeout(soon);
    soon = setTimeout(() => load(false), 250);
  }
  // start loads the status, then follows the events (again, if the
  // stream gave up).
  async function start() {
    const st = await load(true);
    if (!st || gone || (stream && section.dataset.stream !== "closed")) return;
    stream?.stop();
    stream = openStream(id, tl, later);
  }

  root.append(el("h1", { id: "session-id" }, id), problem,
    el("div", { class: "session-grid" },
      el("div", { class: "main" }, el("h2", {}, "Timeline"), section, hitl, composerForm(id, later)),
      el("aside", { class: "side" }, status, actionsSection(id, later))));
  start();
  return {
    refresh: start,
    unmount() {
      gone = true;
      clearTimeout(soon);
      stream?.stop();
    },
  };
}
