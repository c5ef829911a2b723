// A session's events, live: an EventSource on GET
// /v1/sessions/<id>/events with a stream token (POST
// /v1/sessions/<id>/stream-token, minted with the user token) from the
// last seq shown. section#timeline[data-stream] says where it stands:
// open, closed (connecting, or given up) or ended (session.ended seen).
//
// EventSource delivers named events only to listeners of that name, so
// the stream listens for every built-in kind; an event of another kind
// (an agent's own) shows up as a hole in the seqs, which is filled from
// GET …/events?follow=false. Without stream tokens on the ingress
// (stream_tokens_disabled) it polls that route instead.

import { call, get, seg } from "./api.js";

const DURABLE = [
  "session.started", "command.applied", "command.rejected", "command.superseded", "turn.started", "turn.step",
  "turn.step_retried", "turn.rolled_back", "message.output", "input.requested", "auth.requested", "task.started",
  "task.completed", "turn.completed", "turn.cancelled", "session.waiting", "session.paused", "session.resumed",
  "session.tagged", "handoff.started", "handoff.skipped", "handoff.completed", "handoff.failed", "wait.cancelled",
  "step.interrupted", "wire.rejected", "session.ended", "error", "limit.reached", "session.quarantined",
  "session.retried", "child.started", "child.completed", "child.waiting", "child.closed", "demo.slept",
];
const LIVE = ["message.delta", "message.discarded", "task.progress"];
const POLL_MS = 3000;
const MAX_BACKOFF_MS = 30000;
const FILL_TRIES = 3;

// openStream follows session id into timeline; onDurable is called after
// each durable event shown. It returns {stop, fill}: fill reads the events
// after the last shown (the status saw a newer seq).
export function openStream(id, timeline, onDurable) {
  const s = new Stream(id, timeline, onDurable);
  s.connect();
  return { stop: () => s.stop(), fill: () => s.fill() };
}

class Stream {
  constructor(id, timeline, onDurable) {
    this.id = id;
    this.tl = timeline;
    this.onDurable = onDurable;
    this.pending = new Map(); // seq → envelope received past a hole
    this.es = null;
    this.timer = 0;
    this.backoff = 1000;
    this.stopped = false;
    this.ended = false;
    this.filling = false;
    this.misses = 0;
    this.state("closed");
  }

  state(s) {
    this.tl.section.dataset.stream = s;
  }

  path(query) {
    return `/v1/sessions/${seg(this.id)}/events?${query}`;
  }

  async connect() {
    this.timer = 0;
    if (this.stopped || this.ended) return;
    let tok;
    try {
      tok = (await call("POST", `/v1/sessions/${seg(this.id)}/stream-token`)).data.token;
    } catch (e) {
      if (this.stopped) return;
      if (e.code === "stream_tokens_disabled") return this.poll();
      if (e.status >= 400 && e.status < 500) return; // no session, or no access: nothing to retry
      return this.retry();
    }
    if (this.stopped) return;
    const es = new EventSource(this.path(`token=${encodeURIComponent(tok)}&after=${this.tl.last}`));
    this.es = es;
    es.onopen = () => {
      this.backoff = 1000;
      this.state("open");
    };
    es.onerror = () => this.onError(es);
    const durable = (m) => this.onMessage(m);
    const live = (m) => this.onLive(m);
    for (const k of DURABLE) es.addEventListener(k, durable);
    for (const k of LIVE) es.addEventListener(k, live);
  }

  // onError: the browser reconnects by itself while it can; a closed
  // EventSource (an expired token is a 401) gets a new token.
  onError(es) {
    if (this.stopped || this.ended || es !== this.es) return;
    this.state("closed");
    if (es.readyState === EventSource.CLOSED) {
      this.es = null;
      this.retry();
    }
  }

  retry() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), this.backoff);
    this.backoff = Math.min(this.backoff * 2, MAX_BACKOFF_MS);
  }

  onMessage(m) {
    try {
      this.receive([JSON.parse(m.data)]);
    } catch {
      // an envelope that is not JSON: the seq hole refills it
    }
  }

  onLive(m) {
    try {
      this.tl.live(m.type, JSON.parse(m.data));
    } catch {
      // a live event is only a preview
    }
  }

  // receive shows the envelopes that follow the last one shown, keeps
  // the others, and fills the hole before them.
  receive(envs) {
    this.ingest(envs);
    if (this.pending.size) this.fill();
  }

  ingest(envs) {
    for (const env of envs) if (env && env.seq > this.tl.last) this.pending.set(env.seq, env);
    let ev;
    while ((ev = this.pending.get(this.tl.last + 1))) {
      this.pending.delete(ev.seq);
      this.tl.add(ev);
      this.onDurable(ev);
      if (ev.kind === "session.ended") this.end();
    }
  }

  // fill reads every committed event after the last one shown. A hole it
  // cannot fill (a lagging replica) is skipped after a few tries.
  async fill() {
    if (this.filling || this.stopped) return;
    this.filling = true;
    let evs = [];
    try {
      evs = await get(this.path(`follow=false&after=${this.tl.last}`), { quiet: true });
    } catch {
      // tried again below while a hole remains
    }
    this.filling = false;
    if (this.stopped) return;
    this.ingest(Array.isArray(evs) ? evs : []);
    if (!this.pending.size) {
      this.misses = 0;
    } else if (++this.misses >= FILL_TRIES) {
      this.misses = 0;
      this.tl.last = Math.min(...this.pending.keys()) - 1;
      this.ingest([]);
    } else {
      setTimeout(() => this.fill(), 500);
    }
  }

  // poll replaces the stream where stream tokens are disabled.
  async poll() {
    this.state("closed");
    await this.fill();
    if (!this.stopped && !this.ended) this.timer = setTimeout(() => this.poll(), POLL_MS);
  }

  end() {
    this.ended = true;
    clearTimeout(this.timer);
    this.es?.close();
    this.es = null;
    this.state("ended");
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.es?.close();
    this.es = null;
  }
}
