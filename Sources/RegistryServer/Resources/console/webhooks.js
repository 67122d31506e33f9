// The project's webhooks, a section of the Relay screen: each hook's state (backlog, sent, failed,
// its last attempt, its last error and when, its next attempt, disabled and why), refreshed with
// the screen; adding one, whose signing secret is shown once; rotating a secret; retrying its
// waiting events now; enabling a disabled hook; deleting a hook.
// Only `/api/webhooks`.
import { del, get, part, post } from "./api.js";
import { count, facts, fill, h, problem, refill, stats, when } from "./dom.js";
import { outcome } from "./token.js";

/** What a webhook can be told (docs/webhooks.md), with what each means to the app server. */
const eventTypes = [
  ["token.unregistered", "A token FCM called gone was unregistered: delete it from your app's database."],
  ["delivery.failed", "A recipient failed for good: a permanent error, or its retries spent."],
  ["message.completed", "Nothing of a message is pending any more: every recipient delivered or failed."],
];

/** `docs/webhooks.md`: a project has at most this many. */
const maximum = 16;

/**
 * The section: `element` to place on the screen, `refresh()` to call with the screen's own
 * refresh, and `heading` to focus when the route names the section.
 */
export function webhooksSection({ project, signal }) {
  const list = h("div", { id: "webhook-list" });
  const said = outcome();
  const heading = h("h2", { id: "webhooks-heading", tabindex: "-1" }, "Webhooks");
  const secret = secretPanel({ hidden: () => heading.focus({ preventScroll: true }) });
  const tally = h("span", { class: "muted", id: "webhook-tally" });
  const intro = h("p", { class: "muted intro" }, "Signed POSTs to your app server when a token is unregistered, a delivery fails for good, or a message is finished (Standard Webhooks; docs/webhooks.md).");
  let hooks = [];
  let wasEmpty = false;

  const refresh = async () => {
    const answer = await get("/api/webhooks");
    if (signal.aborted) return;
    hooks = answer.webhooks;
    tally.textContent = hooks.length ? `${count(hooks.length)} of ${maximum}` : "";
    // With none, the empty state says it at more length.
    intro.hidden = !hooks.length;
    add.hidden = false;
    // Nothing to list: the way to add one opens (once: a refresh leaves it as the operator set it).
    if (!hooks.length && !wasEmpty) add.open = true;
    wasEmpty = !hooks.length;
    if (!hooks.length) {
      refill(list, emptyState(project));
      return;
    }
    refill(list, hooks.map((hook) => hookCard(hook, { rotate, retry, enable, remove })));
  };

  const rotate = async (hook) => {
    if (!confirm(`Rotate the signing secret of the webhook to ${hook.url}?\n\nA new secret is made and shown once. The current one keeps signing beside it for 24 hours, so the receiver verifies both while you update it.`)) return;
    try {
      const answer = await post(`/api/webhooks/${part(hook.id)}:rotateSecret`);
      said.clear();
      secret.show({
        url: answer.url,
        secret: answer.secret,
        what: "The new signing secret of the webhook to",
        note: "The previous secret keeps signing beside this one for 24 hours: give this one to the receiver before then.",
      });
      await refresh();
    } catch (error) { said.failed(error); }
  };

  const enable = async (hook) => {
    const waiting = hook.backlog ? ` Its ${count(hook.backlog)} waiting ${hook.backlog === 1 ? "event is" : "events are"} sent at once.` : "";
    if (!confirm(`Enable the webhook to ${hook.url} again?\n\nIt keeps its id and signing secret, so the receiver needs no change, and gets new events again.${waiting} If the endpoint still fails for 3 days, it is disabled again.`)) return;
    try {
      await post(`/api/webhooks/${part(hook.id)}:enable`);
      said.done(`Enabled the webhook to ${hook.url}: it gets events again${hook.backlog ? `, starting with its ${count(hook.backlog)} waiting ${hook.backlog === 1 ? "one" : "ones"}` : ""}.`);
      await refresh();
    } catch (error) { said.failed(error); }
  };

  const retry = async (hook) => {
    try {
      await post(`/api/webhooks/${part(hook.id)}:retry`);
      said.done(`Retrying now: the ${count(hook.backlog)} waiting ${hook.backlog === 1 ? "event of the webhook to " + hook.url + " is" : "events of the webhook to " + hook.url + " are"} due at once.`);
      await refresh();
    } catch (error) { said.failed(error); }
  };

  const remove = async (hook) => {
    const waiting = hook.backlog ? ` Its ${count(hook.backlog)} waiting ${hook.backlog === 1 ? "event is" : "events are"} dropped.` : "";
    if (!confirm(`Delete the webhook to ${hook.url}?\n\nIt gets no more events.${waiting} This cannot be undone: to hear from the registry again, add the endpoint again (with a new secret).`)) return;
    try {
      await del(`/api/webhooks/${part(hook.id)}`);
      if (secret.belongsTo(hook.url)) secret.hide();
      said.done(`Deleted the webhook to ${hook.url}: it gets no more events${hook.backlog ? `, and its ${count(hook.backlog)} waiting ${hook.backlog === 1 ? "event was" : "events were"} dropped` : ""}.`);
      await refresh();
    } catch (error) { said.failed(error); }
  };

  const add = addForm({
    added: async (answer) => {
      said.clear();
      secret.show({ url: answer.url, secret: answer.secret, what: "Added: from now on every event is signed with this secret and POSTed to" });
      add.open = false;
      await refresh();
    },
  });
  add.hidden = true;

  const element = h("section", { id: "webhooks", class: "webhooks", "aria-labelledby": "webhooks-heading" },
    h("div", { class: "split" }, heading, tally),
    intro,
    secret.element,
    said.element,
    list,
    add);
  return { element, refresh, heading };
}

/** What webhooks are for and how to add one, where the list would be. */
function emptyState(project) {
  return h("div", { class: "card", id: "webhooks-empty" },
    h("p", {}, "No webhook yet. A webhook tells your app server what became of its tokens and messages as it happens: a token FCM called gone (so the app deletes it), a delivery that failed for good, a message finished. Each event is a signed POST that the standardwebhooks and svix libraries verify."),
    h("p", { class: "muted" }, "Add one below: the endpoint's URL and the events it wants. Its signing secret is shown once, when it is added."),
    project.delivery === "relayed" ? null
      : h("p", { class: "muted" }, "Events come from relayed messages: this project only records its messages, so a webhook gets nothing until fcm-registry project relay turns delivery on."));
}

/** A hook's state in a word, as a badge. */
function stateBadge(hook) {
  if (hook.disabled) return h("span", { class: "badge failed", dataset: { state: "disabled" } }, "disabled");
  if (hook.failingSince) return h("span", { class: "badge pending", dataset: { state: "failing" } }, `failing since ${when(hook.failingSince)}`);
  if (hook.lastAttemptAt) return h("span", { class: "badge delivered", dataset: { state: "working" } }, "working");
  return h("span", { class: "badge", dataset: { state: "new" } }, "no event sent yet");
}

/** When the next attempt is due: "in 4 min" style when later, "under way" when its time has come. */
function nextAttempt(hook) {
  if (!hook.nextAttemptAt) return "nothing waits";
  const at = h("time", { datetime: hook.nextAttemptAt, dataset: { field: "nextAttemptAt" } }, when(hook.nextAttemptAt));
  return Date.parse(hook.nextAttemptAt) > Date.now() ? at : [at, h("span", { class: "muted" }, " (due: under way)")];
}

function hookCard(hook, { rotate, retry, enable, remove }) {
  return h("article", { class: "card hook", dataset: { hook: hook.id }, "aria-label": `Webhook to ${hook.url}` },
    h("div", { class: "split" },
      h("h3", {}, h("code", {}, hook.url)),
      stateBadge(hook)),
    stats([
      ["Backlog", hook.backlog, "backlog"], ["Sent", hook.sent, "sent"],
      ["Failed", hook.failed, "failed"], ["Dropped", hook.dropped, "dropped"],
    ]),
    facts([
      ["Events", h("span", { class: "badges" }, hook.events.map((event) => h("code", { class: "badge" }, event)))],
      ["Last attempt", hook.lastAttemptAt ? when(hook.lastAttemptAt) : "none yet"],
      ["Last error", hook.lastError
        ? [h("code", { class: "fcm-error", dataset: { field: "lastError" } }, hook.lastError),
          hook.lastErrorAt ? [" ", h("time", { datetime: hook.lastErrorAt, class: "muted", dataset: { field: "lastErrorAt" } }, `at ${when(hook.lastErrorAt)}`)] : null,
          hook.failingSince ? null : h("span", { class: "muted" }, " (it has answered since)")]
        : "none"],
      hook.backlog && !hook.disabled ? ["Next attempt", nextAttempt(hook)] : null,
      hook.disabled ? ["Disabled", [`${when(hook.disabledAt)}: `, h("span", { dataset: { field: "disabledReason" } }, hook.disabledReason || "every attempt failed for 3 days"), h("br"),
        h("span", { class: "muted" }, "Nothing is queued or sent for it. Once the endpoint answers again, enable it: its id and secret stay, and what waits is sent at once.")]] : null,
      hook.previousSecretExpiresAt ? ["Previous secret", `signs beside the current one until ${when(hook.previousSecretExpiresAt)}`] : null,
      ["Added", [when(hook.createdAt), h("span", { class: "muted" }, ` · ${hook.id}`)]],
    ].filter(Boolean)),
    h("div", { class: "actions" },
      hook.backlog && !hook.disabled && hook.failingSince ? h("button", { type: "button", class: "small retry", "data-needs": "admin", dataset: { key: `retry-${hook.id}` }, "aria-label": `Retry the waiting events of ${hook.url} now`, onclick: () => retry(hook) }, "Retry now") : null,
      hook.disabled ? h("button", { type: "button", class: "small enable", "data-needs": "admin", dataset: { key: `enable-${hook.id}` }, "aria-label": `Enable the webhook to ${hook.url} again…`, onclick: () => enable(hook) }, "Enable…") : null,
      h("button", { type: "button", class: "plain small rotate", "data-needs": "admin", dataset: { key: `rotate-${hook.id}` }, "aria-label": `Rotate the secret of ${hook.url}…`, onclick: () => rotate(hook) }, "Rotate secret…"),
      h("button", { type: "button", class: "danger small delete", "data-needs": "admin", dataset: { key: `delete-${hook.id}` }, "aria-label": `Delete the webhook to ${hook.url}…`, onclick: () => remove(hook) }, "Delete…")));
}

/** "Add a webhook": the endpoint's URL and its events; the API's refusal is shown in the form. */
function addForm({ added }) {
  const url = h("input", { id: "webhook-url", type: "url", required: true, autocomplete: "off", spellcheck: "false",
    placeholder: "https://app.example.com/fcm-events", "aria-describedby": "webhook-url-help" });
  const boxes = eventTypes.map(([name]) => h("input", { type: "checkbox", id: `webhook-event-${name.replace(".", "-")}`, value: name, checked: true }));
  const status = h("div", { role: "status", "aria-live": "polite" });
  const submit = h("button", { type: "submit", id: "add-webhook" }, "Add webhook");
  const form = h("form", { "data-needs": "admin", onsubmit: async (event) => {
      event.preventDefault();
      const events = boxes.filter((box) => box.checked).map((box) => box.value);
      if (!events.length) { fill(status, problem(new Error("Choose at least one event."))); return; }
      submit.disabled = true;
      fill(status, h("p", { class: "muted" }, "Adding…"));
      try {
        const answer = await post("/api/webhooks", { url: url.value.trim(), events });
        fill(status);
        form.reset();
        await added(answer);
      } catch (error) {
        fill(status, problem(error));
        url.focus();
      } finally {
        submit.disabled = false;
      }
    } },
    h("label", { for: "webhook-url" }, "Endpoint URL"),
    url,
    h("p", { id: "webhook-url-help", class: "muted" }, "Where each event is POSTed: https, at a public address. The registry checks it now and at every attempt."),
    h("fieldset", { class: "events" },
      h("legend", {}, "Events"),
      eventTypes.map(([name, meaning], index) => h("label", { class: "check", for: boxes[index].id },
        boxes[index], h("span", {}, h("code", {}, name), h("span", { class: "muted" }, ` — ${meaning}`))))),
    h("div", { class: "actions" }, submit),
    status);
  return h("details", { class: "card manage", id: "add-webhook-form" }, h("summary", {}, "Add a webhook"), form);
}

/**
 * The secret of a hook just added or rotated: shown once, with a copy button, until the operator
 * says they kept it or leaves the screen. It sits outside the refreshed list, so a refresh keeps it.
 */
function secretPanel({ hidden }) {
  const element = h("div", { id: "webhook-secret-panel" });
  let shownFor = null;
  const hide = () => { shownFor = null; fill(element); };
  return {
    element,
    hide,
    belongsTo: (url) => shownFor === url,
    /** `what`: the line that says whose secret it is; `note`, what else to know. */
    show({ url, secret, what, note }) {
      shownFor = url;
      // Text, not a field: it wraps to be read whole on a phone, and one click selects all of it.
      const value = h("code", { id: "webhook-secret", class: "secret-text", "aria-labelledby": "webhook-secret-label" }, secret);
      const copied = h("p", { class: "muted copied", role: "status", "aria-live": "polite", id: "webhook-secret-copied" });
      const select = () => {
        const range = document.createRange();
        range.selectNodeContents(value);
        getSelection().removeAllRanges();
        getSelection().addRange(range);
      };
      const copy = h("button", { type: "button", class: "plain", id: "copy-webhook-secret", onclick: async () => {
          // The clipboard is there only in a secure context (HTTPS or localhost), and may be refused.
          try {
            if (!navigator.clipboard) throw new Error("no clipboard");
            await navigator.clipboard.writeText(secret);
            copied.textContent = "Copied to the clipboard.";
          } catch {
            select();
            copied.textContent = "Selected: press Ctrl+C (⌘C on a Mac) to copy it.";
          }
        } }, "Copy");
      fill(element, h("section", { class: "card secret", "aria-labelledby": "webhook-secret-title" },
        h("h3", { id: "webhook-secret-title" }, "Copy the signing secret now: it will not be shown again"),
        h("p", {}, what, " ", h("code", {}, url), "."),
        h("p", { id: "webhook-secret-label", class: "label" }, "Signing secret"),
        h("div", { class: "secret-value" }, value, copy),
        copied,
        note ? h("p", {}, note) : null,
        h("p", { class: "muted" }, "Keep it with the receiver, which verifies each event's signature with it (docs/webhooks.md). If it is lost, rotate the secret to get a new one."),
        h("div", { class: "actions" }, h("button", { type: "button", id: "hide-webhook-secret", onclick: () => { hide(); hidden(); } }, "I have kept it"))));
      copy.focus();
    },
  };
}
