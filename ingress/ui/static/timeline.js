// A session's timeline, section#timeline: durable events in seq order,
// grouped by turn (div.turn[data-turn]), with the live output of the
// running step (div.live-output) and task progress notes.

import { renderEvent } from "./events.js";
import { el } from "./dom.js";

const TURN_END = ["turn.completed", "turn.cancelled"];

// ownTurn is the turn of this session an event names ("" for none): a
// child.* event's turnId is its child's turn.
function ownTurn(ev) {
  const d = ev.data || {};
  return ev.kind.startsWith("child.") || typeof d.turnId !== "string" ? "" : d.turnId;
}

export class Timeline {
  // section is the (empty) section#timeline.
  constructor(section) {
    this.section = section;
    this.last = 0; // the seq of the last event shown
    this.open = ""; // the turn started and not yet over
    this.turns = new Map(); // turnId → div.turn
    section.dataset.lastSeq = "0";
  }

  // add shows one durable event (an envelope) after the last one; it
  // reports whether it was new.
  add(ev) {
    if (!(ev.seq > this.last)) return false;
    const d = ev.data || {};
    if (ev.kind === "turn.started" && d.turnId) this.open = d.turnId;
    const turnId = ownTurn(ev) || this.open;
    const node = renderEvent(ev);
    if (turnId) this.intoTurn(turnId, node);
    else this.outside(node);
    this.settle(ev, turnId);
    this.last = ev.seq;
    this.section.dataset.lastSeq = String(ev.seq);
    return true;
  }

  // intoTurn appends a durable event to its turn, before the live output.
  intoTurn(turnId, node) {
    const t = this.turn(turnId);
    delete t.dataset.liveOnly;
    t.insertBefore(node, t.querySelector(":scope > .live-output"));
  }

  // outside appends an event outside any turn, before a turn only live
  // output has shown so far (its durable events are yet to come).
  outside(node) {
    const lastChild = this.section.lastElementChild;
    if (lastChild && lastChild.dataset.liveOnly !== undefined) this.section.insertBefore(node, lastChild);
    else this.section.insertBefore(node, this.section.querySelector(":scope > .task-progress"));
  }

  // settle ends what an event ends: the live output of a turn whose
  // durable output arrived, a turn that is over, a finished task's notes.
  settle(ev, turnId) {
    const d = ev.data || {};
    if ((ev.kind === "message.output" || TURN_END.includes(ev.kind)) && turnId) {
      this.turns.get(turnId)?.querySelector(":scope > .live-output")?.remove();
    }
    if (TURN_END.includes(ev.kind) && d.turnId) {
      this.turns.get(d.turnId)?.classList.add(ev.kind === "turn.completed" ? "completed" : "cancelled");
      if (this.open === d.turnId) this.open = "";
    }
    if (ev.kind === "task.completed" && d.taskId) this.progress(d.taskId)?.remove();
  }

  // turn is div.turn[data-turn=turnId], made at the end when new.
  turn(turnId) {
    let t = this.turns.get(turnId);
    if (!t) {
      t = el("div", { class: "turn", "data-turn": turnId }, el("div", { class: "turn-head" }, "turn ", el("code", {}, turnId)));
      this.section.insertBefore(t, this.section.querySelector(":scope > .task-progress"));
      this.turns.set(turnId, t);
    }
    return t;
  }

  // live shows a live event (an envelope without seq).
  live(kind, env) {
    const d = env.data || {};
    if (kind === "task.progress" && d.taskId) {
      const p = this.progress(d.taskId) || this.section.appendChild(
        el("div", { class: "task-progress", "data-task-id": d.taskId }));
      p.textContent = `task ${d.taskId}: ${d.note || ""}`;
      return;
    }
    if (!d.turnId) return;
    let out = this.turns.get(d.turnId)?.querySelector(":scope > .live-output");
    if (kind === "message.discarded") {
      if (out) out.textContent = "";
      return;
    }
    if (kind !== "message.delta") return;
    if (!out) {
      const known = this.turns.has(d.turnId);
      const t = this.turn(d.turnId);
      if (!known) t.dataset.liveOnly = "";
      out = t.appendChild(el("div", { class: "live-output", "aria-live": "polite" }));
    }
    out.dataset.step = String(d.step ?? "");
    out.textContent += d.text || "";
  }

  progress(taskId) {
    return [...this.section.querySelectorAll(":scope > .task-progress")].find((p) => p.dataset.taskId === taskId);
  }
}
