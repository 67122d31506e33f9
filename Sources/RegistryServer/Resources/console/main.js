// The console's shell: signing in and out, and the hash routes that pick a screen.
import { forget, get, remember, serverKey, whenUnauthorized } from "./api.js";
import { fill, h, live, problem } from "./dom.js";
import { overview } from "./overview.js";
import { conditions } from "./conditions.js";
import { groupDetail, groupList, topicDetail, topicList } from "./audiences.js";
import { tokenView } from "./token.js";
import { messageDetail, messageList } from "./messages.js";
import { relayView } from "./relay.js";
import { compose } from "./compose.js";
import { auditView } from "./audit.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const projectLabel = document.getElementById("project");
const signOutButton = document.getElementById("sign-out");

/** Hash routes: a pattern, and the screen it shows with the pattern's (decoded) groups. */
const routes = [
  [/^#\/overview$/, overview],
  [/^#\/conditions$/, conditions],
  [/^#\/topics$/, topicList],
  [/^#\/topics\/(.+)$/, topicDetail],
  [/^#\/groups$/, groupList],
  [/^#\/groups\/(.+)$/, groupDetail],
  [/^#\/tokens(?:\/(.+))?$/, tokenView],
  [/^#\/messages$/, messageList],
  [/^#\/messages\/(.+)$/, messageDetail],
  [/^#\/relay(?:\/(webhooks))?$/, relayView],
  [/^#\/compose(?:\/(token|topic|condition|group)\/(.+))?$/, compose],
  [/^#\/audit$/, auditView],
];

/** The project the key opens: `GET /api/project`. */
let project = null;
/** Stops the header's own refresh when the tab signs out. */
let session = new AbortController();
/** How often the header asks again whether the project delivers, as the live screens ask theirs. */
const headerEvery = 5000;
/** When a screen last told the header how the project delivers (then the header need not ask). */
let heardAt = 0;
/** Stops the screen shown (its timers and refreshes) when another is shown. */
let leaving = new AbortController();

async function show() {
  leaving.abort();
  leaving = new AbortController();
  // This screen's own signal: a screen that answers late must not touch the one shown since.
  const signal = leaving.signal;
  if (!serverKey() || !project) return signInScreen();
  const hash = location.hash || "#/overview";
  for (const [pattern, screen] of routes) {
    const match = hash.match(pattern);
    if (!match) continue;
    markCurrent(hash);
    try {
      const parameters = match.slice(1).map((value) => (value === undefined ? undefined : decodeURIComponent(value)));
      await screen(main, { project, signal }, ...parameters);
    } catch (error) {
      if (!signal.aborted) fill(main, h("h1", {}, "Something went wrong"), problem(error));
    }
    if (signal.aborted) return;
    const heading = main.querySelector("h1");
    // Each screen starts at its heading, for screen readers and the keyboard; it is focused, not
    // outlined (it is no control).
    if (heading && !main.contains(document.activeElement)) { heading.tabIndex = -1; heading.focus({ preventScroll: true }); }
    return;
  }
  location.hash = "#/overview";
}

function markCurrent(hash) {
  const section = hash.split("/")[1];
  for (const link of nav.querySelectorAll("a")) {
    if (link.getAttribute("href") === `#/${section}`) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

function signInScreen(message) {
  nav.hidden = true;
  signOutButton.hidden = true;
  projectLabel.textContent = "";
  document.title = "Sign in · fcm-registry console";
  const input = h("input", { id: "server-key", type: "password", autocomplete: "off", required: true, "aria-describedby": "key-help" });
  const status = h("div", { role: "status", "aria-live": "polite" }, message ? problem(new Error(message)) : null);
  const form = h("form", { class: "card signin", onsubmit: async (event) => {
      event.preventDefault();
      fill(status, h("p", { class: "muted" }, "Signing in…"));
      try {
        await signIn(input.value.trim());
      } catch (error) {
        fill(status, problem(error.status === 401 ? new Error("That key does not open a project here.") : error));
      }
    } },
    h("h1", {}, "Sign in"),
    h("label", { for: "server-key" }, "Server key"),
    input,
    h("p", { id: "key-help" }, "A project's server key, as fcm-registry printed it. It is kept only in this tab's session storage and sent only to this server."),
    h("button", { type: "submit" }, "Sign in"),
    status);
  fill(main, form);
  input.focus();
}

async function signIn(key) {
  project = await get("/api/project", undefined, { key });
  remember(key);
  await readScopes(key);
  signedIn();
  if (!location.hash || location.hash === "#/") location.hash = "#/overview";
  else await show();
}

/**
 * What the key may do (`GET /api/keys/current`), on <html data-scopes="send read …">: every
 * button and form a scope would refuse carries `data-needs`, and console.css hides it unless the
 * key has that scope or `admin`. Until it is known, and if it cannot be read, nothing is offered.
 */
async function readScopes(key) {
  delete document.documentElement.dataset.scopes;
  try {
    const current = await get("/api/keys/current", undefined, { key });
    document.documentElement.dataset.scopes = current.scopes.join(" ");
  } catch {
    // Nothing is offered that might be refused.
  }
}

function signedIn() {
  nav.hidden = false;
  signOutButton.hidden = false;
  fill(projectLabel, h("span", { class: "project-id" }, project.projectId), h("span", { class: "sender" }, ` · sender ${project.senderId}`),
    // Announced when it changes: delivery turned off is news wherever the reader is.
    " ", h("span", { id: "delivery", "aria-live": "polite" }));
  showDelivery(project.delivery);
  document.title = `${project.projectId} · fcm-registry console`;
  // The badge follows the relay while the tab is open (`project relay --off` on any server), as
  // every count on a screen does: asked again every 5 s while the tab is visible, unless a
  // screen that reads it (Overview, Relay) just told it.
  session.abort();
  session = new AbortController();
  live(session.signal, async () => {
    if (Date.now() - heardAt < headerEvery) return;
    const now = await get("/api/project");
    if (project && now.projectId === project.projectId) showDelivery(now.delivery);
  }, headerEvery);
}

/**
 * The header's badge: a project without a relay only records what it is sent, so say so
 * wherever the user looks. `delivery` is `GET /api/project`'s: `relayed` or `recorded`.
 */
function showDelivery(delivery) {
  const badge = document.getElementById("delivery");
  if (!project || !badge) return;
  project.delivery = delivery;
  if (badge.dataset.delivery === delivery) return;
  badge.dataset.delivery = delivery;
  badge.className = `delivery ${delivery}`;
  badge.title = delivery === "relayed"
    ? "Messages are delivered to devices through FCM HTTP v1."
    : "Messages are recorded in the message log only: nothing reaches a device until `fcm-registry project relay` turns delivery on.";
  badge.textContent = delivery === "relayed" ? "delivering" : "recording only";
}

// A screen that has just read how the project delivers says so (`delivery` event): the header
// shows it at once.
document.addEventListener("delivery", (event) => { heardAt = Date.now(); showDelivery(event.detail); });

function signOut(message) {
  forget();
  delete document.documentElement.dataset.scopes;
  project = null;
  session.abort();
  leaving.abort();
  signInScreen(message);
}

whenUnauthorized(() => { if (project) signOut("The key no longer opens a project here: sign in again."); });
signOutButton.addEventListener("click", () => signOut());
// The skip link moves focus, not the route.
document.querySelector("a.skip").addEventListener("click", (event) => {
  event.preventDefault();
  main.focus();
});
window.addEventListener("hashchange", show);

// A tab that signed in before (a reload) goes on with its key.
(async () => {
  const key = serverKey();
  if (!key) return signInScreen();
  try {
    project = await get("/api/project");
    await readScopes(key);
    signedIn();
    await show();
  } catch (error) {
    signOut(error.status === 401 ? "The key no longer opens a project here: sign in again." : error.message);
  }
})();
