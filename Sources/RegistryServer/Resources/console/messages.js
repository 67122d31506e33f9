// The message log, newest first, with what happened to each message on each device. The list
// carries each message's counts (one call a page); the screens refresh while they are shown.
import { get, part, post } from "./api.js";
import { count, facts, fill, h, live, Pager, problem, refill, segment, stats, table, when } from "./dom.js";

/** How often the list and a message's screen ask again while shown. */
const listEvery = 5000;
const detailEvery = 2000;

/** "pending 3 · delivered 10 · failed 1", or why there is no delivery state. */
export function deliveryBadges(delivery) {
  if (!delivery) return h("span", { class: "muted" }, "not relayed");
  return h("span", { class: "badges" },
    delivery.pending ? h("span", { class: "badge pending" }, `pending ${count(delivery.pending)}`) : null,
    h("span", { class: "badge delivered" }, `delivered ${count(delivery.delivered)}`),
    delivery.failed ? h("span", { class: "badge failed" }, `failed ${count(delivery.failed)}`) : null,
    delivery.cancelled ? h("span", { class: "badge cancelled" }, `cancelled ${count(delivery.cancelled)}`) : null);
}

/** What a reader recognises a message by: its notification's title or body, else its data keys. */
export function summary(message) {
  let payload;
  try { payload = JSON.parse(message.payload); } catch { return ""; }
  const notification = payload.notification || {};
  const text = [notification.title, notification.body].filter(Boolean).join(" — ");
  if (text) return text.length > 80 ? `${text.slice(0, 79)}…` : text;
  const keys = Object.keys(payload.data || {});
  return keys.length ? h("span", { class: "muted" }, `data: ${keys.slice(0, 4).join(", ")}${keys.length > 4 ? "…" : ""}`) : "";
}

/** A page of messages as a table: when, what, to whom, and the delivery counts. */
export function messageTable(messages, { caption, empty, token }) {
  return table({
    caption,
    columns: [
      { label: "Received", value: (message) => h("a", { href: `#/messages/${segment(message.id)}` }, when(message.receivedAt)) },
      { label: "Message", value: summary },
      { label: "Target", className: "target", value: (message) => message.target },
      { label: "Via", className: "via", value: (message) => message.protocol },
      token
        ? { label: "On this token", value: (message) => tokenState(message.tokenDelivery) }
        : { label: "Delivery", value: (message) => deliveryBadges(message.delivery) },
    ],
    rows: messages,
    empty,
  });
}

/** What became of a message on one token, with FCM's error. */
function tokenState(delivery) {
  if (!delivery) return h("span", { class: "muted" }, "not relayed");
  return h("span", { class: "badges" },
    h("span", { class: `badge ${delivery.state}` }, delivery.state),
    delivery.error ? h("code", { class: "fcm-error" }, delivery.error) : null);
}

export async function messageList(main, { signal }) {
  const listing = h("div");
  const status = h("div", { role: "status", "aria-live": "polite" });
  const pager = new Pager(async (pageToken, current) => {
    const page = await get("/api/messages", { pageSize: 20, pageToken });
    if (signal.aborted || !current()) return undefined;
    refill(listing, messageTable(page.messages, {
      caption: "Messages, newest first",
      empty: [h("span", {}, "No message yet. Sends to topics and conditions are always logged, sends to tokens when they reach one. "),
        h("a", { href: "#/compose" }, "Send a test message"), "."],
    }));
    return page.nextPageToken;
  });
  fill(main,
    h("div", { class: "split" }, h("h1", {}, "Messages"), h("a", { class: "button", href: "#/compose", "data-needs": "send" }, "Send a message")),
    status, listing, pager.element);
  await pager.first().catch((error) => fill(status, problem(error)));
  live(signal, () => pager.refresh(), listEvery);
}

const states = ["failed", "pending", "delivered", "cancelled"];

export async function messageDetail(main, { signal }, id) {
  let chosen;
  const summaryCard = h("section", { class: "card", id: "delivery-summary" });
  const tabs = h("div", { class: "tabs", role: "group", "aria-label": "Recipients in state" });
  const listing = h("div");
  const pager = new Pager(async (pageToken, current) => {
    const page = await get(`/api/messages/${part(id)}/deliveries`, { state: chosen, pageSize: 100, pageToken });
    if (signal.aborted || !current()) return undefined;
    refill(listing, table({
      caption: `Recipients ${chosen}`,
      columns: [
        { label: "Token", className: "token", value: (delivery) => h("a", { href: `#/tokens/${segment(delivery.token)}` }, delivery.token) },
        { label: "State", value: (delivery) => h("span", { class: `badge ${delivery.state}` }, delivery.state) },
        { label: "FCM's error", value: (delivery) => delivery.error ? h("code", { class: "fcm-error" }, delivery.error) : "—" },
        { label: "Attempts", numeric: true, value: (delivery) => count(delivery.attempts) },
      ],
      rows: page.deliveries,
      empty: `No recipient is ${chosen}.`,
    }));
    return page.nextPageToken;
  });
  const choose = (state) => {
    chosen = state;
    for (const button of tabs.querySelectorAll("button")) button.setAttribute("aria-pressed", String(button.dataset.state === state));
    pager.first();
  };
  // The cancelled tab only once something was cancelled.
  const showTabs = (delivery) => {
    for (const button of tabs.querySelectorAll("button[data-state='cancelled']")) button.hidden = !delivery.cancelled;
  };
  fill(tabs, states.map((state) => h("button", { type: "button", dataset: { state }, "aria-pressed": "false", onclick: () => choose(state) }, state)));

  // A fan-out sent by mistake is stopped here: what has not been sent never is.
  const cancelBox = h("div", { class: "actions", id: "cancel-delivery" });
  const cancelDelivery = async () => {
    const pendingNow = Number(summaryCard.querySelector("dd[data-stat='pending']")?.dataset.value || 0);
    if (!confirm(`Cancel this message?\n\nIts ${count(pendingNow)} recipients without an outcome are never sent (a few requests already on their way to FCM may still arrive). Recipients already delivered or failed keep their outcome. This cannot be undone.`)) return;
    try {
      const answer = await post(`/api/messages/${part(id)}:cancel`);
      showDelivery(answer.delivery);
      refill(cancelBox, h("p", { class: "done", role: "status" }, `Cancelled: ${count(answer.delivery.cancelled)} recipients will not be sent.`));
      choose("cancelled");
    } catch (error) {
      refill(cancelBox, problem(error));
    }
  };

  const message = await get(`/api/messages/${part(id)}`);
  if (signal.aborted) return;
  let payload;
  try { payload = JSON.stringify(JSON.parse(message.payload), null, 2); } catch { payload = message.payload; }
  const title = summary(message);
  fill(main,
    h("p", { class: "back" }, h("a", { href: "#/messages" }, "← Messages")),
    h("h1", {}, "Message"),
    h("section", { class: "card" }, facts([
      ["Id", h("code", {}, message.id)],
      ["Message", title || "—"],
      ["Target", message.target],
      ["Via", message.protocol],
      ["Received", when(message.receivedAt)],
      ["Recipients", count(message.recipientCount)],
    ])),
    h("h2", {}, "Delivery"),
    summaryCard,
    cancelBox,
    message.delivery ? [tabs, listing, pager.element] : null,
    h("h2", {}, "Payload, as fcm-registry understood it"),
    h("pre", {}, payload));

  const showDelivery = (delivery) => {
    refill(summaryCard, delivery
      ? stats([
        ["Pending", delivery.pending, "pending"], ["Delivered", delivery.delivered, "delivered"], ["Failed", delivery.failed, "failed"],
        ...(delivery.cancelled ? [["Cancelled", delivery.cancelled, "cancelled"]] : []),
      ])
      : h("p", { class: "muted" }, "Not relayed: the project did not deliver through FCM when this message came, or it was a dry run."));
    if (!delivery) return;
    showTabs(delivery);
    // Cancel is offered while something is left to send.
    const button = cancelBox.querySelector("button#cancel");
    if (delivery.pending && !button) {
      refill(cancelBox, h("button", { type: "button", class: "danger", id: "cancel", "data-needs": "send", onclick: cancelDelivery }, "Cancel delivery…"));
    } else if (!delivery.pending && button) {
      refill(cancelBox);
    }
  };
  showDelivery(message.delivery);
  if (!message.delivery) return;
  choose(message.delivery.failed ? "failed" : message.delivery.pending ? "pending" : message.delivery.cancelled ? "cancelled" : "delivered");
  // The counts, and the page of recipients shown, follow the deliveries while the screen is shown.
  let settled = !message.delivery.pending;
  live(signal, async () => {
    if (settled) return;
    const now = await get(`/api/messages/${part(id)}`);
    if (signal.aborted) return;
    showDelivery(now.delivery);
    await pager.refresh();
    settled = !now.delivery || !now.delivery.pending;
  }, detailEvery);
}
