// The human-in-the-loop forms of a session: one form.input-form per
// pending input request, one form.authorize-form per pending
// authorization, kept in step with the status's waitingFor (a form being
// filled in stays as it is while its request is pending).

import { act, seg } from "./api.js";
import { el } from "./dom.js";

// inputValue is what an answer's text is sent as: the JSON it parses as
// (but null, which is no answer), else the text as a JSON string.
export function inputValue(text) {
  try {
    const v = JSON.parse(text);
    return v === null ? text : v;
  } catch {
    return text;
  }
}

// busy disables a form's buttons while its request runs.
async function busy(form, fn) {
  const buttons = [...form.querySelectorAll("button")];
  buttons.forEach((b) => (b.disabled = true));
  try {
    return await fn();
  } finally {
    buttons.forEach((b) => (b.disabled = false));
  }
}

function inputForm(id, w, after) {
  const form = el("form", { class: "input-form", "data-request-id": w.requestId },
    el("p", { class: "prompt" }, w.question || "The agent asks for an input."),
    el("textarea", { name: "value", rows: "3", placeholder: "Your answer: text, or JSON" }),
    el("div", { class: "row" }, el("button", { type: "submit" }, "Answer"), el("small", {}, `request ${w.requestId}`)));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { requestId: w.requestId, value: inputValue(form.elements.value.value) };
    const r = await busy(form, () => act("input", "POST", `/v1/sessions/${seg(id)}/input`, { body }));
    if (r) form.elements.value.value = "";
    after();
  });
  return form;
}

function authorizeForm(id, w, after) {
  const form = el("form", { class: "authorize-form", "data-attempt-id": w.attemptId },
    el("p", { class: "prompt" }, `Authorization requested (attempt ${w.attemptId}).`),
    el("div", { class: "row" },
      el("button", { type: "submit", name: "result", value: "granted", class: "good" }, "Grant"),
      el("button", { type: "submit", name: "result", value: "denied", class: "bad" }, "Deny")));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const result = e.submitter && e.submitter.value;
    if (result !== "granted" && result !== "denied") return;
    const body = { attemptId: w.attemptId, result };
    await busy(form, () => act("authorize", "POST", `/v1/sessions/${seg(id)}/authorize`, { body }));
    after();
  });
  return form;
}

// sync keeps section's forms of one kind (selector, keyed by the data
// attribute key) equal to the pending waits.
function sync(section, selector, key, waits, make) {
  const want = new Map(waits.map((w) => [w[key], w]));
  for (const f of section.querySelectorAll(selector)) {
    if (want.has(f.dataset[key])) want.delete(f.dataset[key]);
    else f.remove();
  }
  for (const w of want.values()) section.append(make(w));
}

// renderHitl shows the forms of a status's pending requests in section.
export function renderHitl(section, id, st, after) {
  const waits = st.waitingFor || [];
  const inputs = waits.filter((w) => w.kind === "input" && w.requestId);
  const auths = waits.filter((w) => w.kind === "authorization" && w.attemptId);
  sync(section, "form.input-form", "requestId", inputs, (w) => inputForm(id, w, after));
  sync(section, "form.authorize-form", "attemptId", auths, (w) => authorizeForm(id, w, after));
  section.hidden = inputs.length + auths.length === 0;
}
