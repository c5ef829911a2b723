// The Baton inspector: hash routing between its three views, the token
// form, the refresh button and the clock of relative times (docs/ui.md).

import { clearResult, saveTokens, token } from "./api.js";
import { el, tick } from "./dom.js";
import * as deployments from "./deployments.js";
import * as session from "./session.js";
import * as sessions from "./sessions.js";

const TICK_MS = 5000;

let current = null;

// route reads the view and its argument from the location's hash.
function route() {
  const hash = location.hash.replace(/^#/, "");
  const m = hash.match(/^\/session\/(.+)$/);
  if (m) return { view: "session", arg: decodeURIComponent(m[1]) };
  if (hash === "/deployments") return { view: "deployments" };
  return { view: "sessions" };
}

// render mounts the view the hash names, after unmounting the last.
function render() {
  current?.unmount();
  clearResult();
  const { view, arg } = route();
  const root = document.getElementById("view");
  root.replaceChildren();
  const mod = { sessions, session, deployments }[view];
  try {
    current = mod.mount(root, arg);
  } catch (e) {
    current = null;
    root.replaceChildren(el("p", { class: "view-error" }, "The page failed: ", String(e)));
  }
  const nav = view === "session" ? "sessions" : view;
  for (const a of document.querySelectorAll("#nav a[data-nav]")) {
    a.classList.toggle("active", a.dataset.nav === nav);
    if (a.dataset.nav === nav) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

function authState() {
  const parts = [token("user") ? "user token set" : "no user token", token("admin") ? "admin token set" : "no admin token"];
  document.querySelector("#auth .auth-state").textContent = parts.join(" · ");
}

function setup() {
  const form = document.getElementById("auth");
  const user = document.getElementById("user-token");
  const admin = document.getElementById("admin-token");
  user.value = token("user");
  admin.value = token("admin");
  authState();
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    saveTokens(user.value.trim(), admin.value.trim());
    authState();
    render();
  });
  document.getElementById("refresh").addEventListener("click", () => current?.refresh());
  window.addEventListener("hashchange", render);
  setInterval(tick, TICK_MS);
  render();
}

setup();
