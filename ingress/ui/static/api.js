// The HTTP API as the inspector calls it: bearer tokens from
// sessionStorage, JSON in and out, every failure an ApiError shown in
// #error (docs/ui.md).

const KEYS = { user: "baton.userToken", admin: "baton.adminToken" };

// token is the saved user or admin token ("" when none).
export function token(kind) {
  return sessionStorage.getItem(KEYS[kind]) || "";
}

// saveTokens keeps both tokens for this tab (an empty one is removed).
export function saveTokens(user, admin) {
  for (const [kind, v] of [["user", user], ["admin", admin]]) {
    if (v) sessionStorage.setItem(KEYS[kind], v);
    else sessionStorage.removeItem(KEYS[kind]);
  }
}

// ApiError is a refused or failed call: the HTTP status (0 when the
// request never got an answer), the API's error code and message.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// call sends one request and returns {status, data}. Options: body (sent
// as JSON), admin (use the admin token), quiet (a failure is thrown but
// not shown in #error). Every failure throws an ApiError.
export async function call(method, path, { body, admin = false, quiet = false } = {}) {
  const headers = { Accept: "application/json" };
  const t = token(admin ? "admin" : "user");
  if (t) headers.Authorization = "Bearer " + t;
  const init = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw report(new ApiError(0, "network", "the ingress did not answer: " + e.message), quiet);
  }
  const data = await readBody(res);
  if (!res.ok) throw report(errorOf(res, data), quiet);
  return { status: res.status, data };
}

// get is call for a GET that returns the answer's body.
export async function get(path, opts) {
  return (await call("GET", path, opts)).data;
}

async function readBody(res) {
  const text = await res.text().catch(() => "");
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function errorOf(res, data) {
  const e = data && data.error;
  if (e && typeof e.code === "string") return new ApiError(res.status, e.code, e.message || "");
  const text = typeof data === "string" ? data.trim() : "";
  return new ApiError(res.status, "http_" + res.status, text || res.statusText || "request failed");
}

function report(err, quiet) {
  if (!quiet) showError(err);
  return err;
}

// showError makes #error visible with err's code and message.
export function showError(err) {
  const box = document.getElementById("error");
  box.querySelector(".code").textContent = err.code || "error";
  box.querySelector(".message").textContent = err.message || "";
  box.hidden = false;
}

// hideError hides #error: a load or an action succeeded.
export function hideError() {
  document.getElementById("error").hidden = true;
}

// showResult writes an action's outcome to #action-result: the HTTP
// status and the answer's error code, or "ok".
export function showResult(action, status, code) {
  const box = document.getElementById("action-result");
  box.textContent = `${status} ${code || "ok"}`;
  box.dataset.action = action;
  box.classList.toggle("failed", Boolean(code));
  box.hidden = false;
}

// clearResult hides #action-result (a new page).
export function clearResult() {
  const box = document.getElementById("action-result");
  box.hidden = true;
  box.textContent = "";
  delete box.dataset.action;
}

// act runs an action the user asked for: its outcome goes to
// #action-result, a failure to #error too. It returns {status, data}, or
// null when the action failed.
export async function act(action, method, path, opts) {
  try {
    const r = await call(method, path, opts);
    showResult(action, r.status, "");
    hideError();
    return r;
  } catch (e) {
    showResult(action, e.status, e.code);
    return null;
  }
}

// seg escapes one path segment.
export const seg = encodeURIComponent;
