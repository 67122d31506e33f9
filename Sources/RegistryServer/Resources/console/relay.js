// Delivery through FCM: the relay's queue, pauses and pruned tokens, the project's webhooks,
// refreshed while shown, and the server's per-minute history of what it delivered.
import { get } from "./api.js";
import { facts, h, live, refill, fill, stats, when } from "./dom.js";
import { historyCard } from "./history.js";
import { webhooksSection } from "./webhooks.js";

const relayEvery = 5000;

/** What the relay's channel shows of its settings (never a secret): FCM's upstream and service account. */
function channelFacts(project) {
  const settings = project.settings || {};
  return [
    ["Channel", project.channel],
    ...(settings.upstream ? [["Upstream", settings.upstream]] : []),
    ...(settings.clientEmail ? [["Service account", settings.clientEmail]] : []),
  ];
}

/** FCM's code of the relay's last error, and when it was recorded (an old database's has no time). */
function lastError(project) {
  return h("span", { class: "last-error" },
    h("code", { class: "fcm-error", dataset: { field: "relayLastError" } }, project.lastError),
    project.lastErrorAt
      ? [" ", h("time", { datetime: project.lastErrorAt, class: "muted", dataset: { field: "relayLastErrorAt" } }, `at ${when(project.lastErrorAt)}`)]
      : null);
}

/** `#/relay`, and `#/relay/webhooks` for the same screen at its webhooks. */
export async function relayView(main, { project, signal }, section) {
  const body = h("div");
  const history = historyCard();
  const webhooks = webhooksSection({ project, signal });
  const refresh = async () => {
    const [answer] = await Promise.all([get("/api/relay"), webhooks.refresh(), history.refresh()]);
    if (signal.aborted) return;
    // The header's badge says the same as this screen.
    document.dispatchEvent(new CustomEvent("delivery", { detail: answer.projects.length ? "relayed" : "recorded" }));
    refill(body, answer.projects.length
      ? answer.projects.map((project) => h("section", { class: "card" },
          h("h2", {}, project.channel === "fcm-v1"
            ? `Delivering to Firebase project ${project.settings.firebaseProjectId}`
            : `Delivering through ${project.channel}`),
          stats([
            ["Queued", project.pending, "pending"], ["In flight", project.inFlight, "inFlight"],
            ["Delivered", project.delivered, "delivered"], ["Failed", project.failed, "failed"],
            ["Pruned tokens", project.pruned, "pruned"],
          ]),
          facts([
            ...channelFacts(project),
            ["Paused until", project.pausedUntil ? h("span", { class: "badge pending" }, when(project.pausedUntil)) : "not paused"],
            ["Last error", project.lastError ? lastError(project) : "none"],
          ]),
          h("p", { class: "muted" }, "Pruned tokens are those FCM answered UNREGISTERED or SENDER_ID_MISMATCH: the registry unregistered them, so they left their groups and topics.")))
      : h("section", { class: "card" },
          h("p", {}, "This project does not relay: messages are checked and logged, not delivered."),
          h("p", { class: "muted" }, "Turn delivery on with fcm-registry project relay --project-id … --service-account firebase-sa.json (docs/relay.md).")));
  };
  await refresh();
  if (signal.aborted) return;
  fill(main, h("h1", {}, "Relay"), body, webhooks.element, history.card);
  if (section === "webhooks") {
    webhooks.heading.focus({ preventScroll: true });
    webhooks.element.scrollIntoView({ block: "start" });
  }
  live(signal, refresh, relayEvery);
}
