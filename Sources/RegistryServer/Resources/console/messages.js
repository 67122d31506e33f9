// The message log, newest first, with what happened to each message on each device; screens
// refresh while deliveries are pending.
import { get, part } from "./api.js";
import { count, facts, fill, h, Pager, problem, segment, stats, table, when } from "./dom.js";

/** How often a screen with pending deliveries asks again. */
const refreshEvery = 2000;

/** "pending 3 · delivered 10 · failed 1", or why there is no delivery state. */
function deliveryBadges(delivery) {
  if (delivery === undefined) return h("span", { class: "muted" }, "…");
  if (delivery === null) return h("span", { class: "muted" }, "not relayed");
  return [
    delivery.pending ? h("span", { class: "badge pending" }, `pending ${count(delivery.pending)}`) : null,
    h("span", { class: "badge delivered" }, `delivered ${count(delivery.delivered)}`), " ",
    delivery.failed ? h("span", { class: "badge failed" }, `failed ${count(delivery.failed)}`) : null,
  ];
}

export async function messageList(main, { signal }) {
  const listing = h("div");
  const status = h("div", { role: "status", "aria-live": "polite" });
  let timer;
  signal.addEventListener("abort", () => clearTimeout(timer));
  const pager = new Pager(async (pageToken, current) => {
    clearTimeout(timer);
    const page = await get("/api/messages", { pageSize: 20, pageToken });
    if (signal.aborted || !current()) return undefined;
    const cells = new Map(page.messages.map((message) => [message.id, h("span", {}, deliveryBadges(undefined))]));
    fill(listing, table({
      caption: "Logged messages, newest first",
      columns: [
        { label: "Received", value: (message) => h("a", { href: `#/messages/${segment(message.id)}` }, when(message.receivedAt)) },
        { label: "Protocol", value: (message) => message.protocol },
        { label: "Target", className: "token", value: (message) => message.target },
        { label: "Recipients", numeric: true, value: (message) => count(message.recipientCount) },
        { label: "Delivery", value: (message) => cells.get(message.id) },
      ],
      rows: page.messages,
      empty: "No message logged yet. Sends to topics and conditions are always logged; sends to tokens when they reach one.",
    }));
    // Each message's delivery state, asked again while any is pending.
    let waiting = page.messages.map((message) => message.id);
    const refresh = async () => {
      const answers = await Promise.all(waiting.map((id) => get(`/api/messages/${part(id)}`).catch(() => null)));
      // Another page (or screen) shown since: this page's refreshes stop.
      if (signal.aborted || !current()) return;
      waiting = [];
      answers.forEach((answer) => {
        if (!answer) return;
        fill(cells.get(answer.id), deliveryBadges(answer.delivery));
        if (answer.delivery && answer.delivery.pending) waiting.push(answer.id);
      });
      if (waiting.length) timer = setTimeout(refresh, refreshEvery);
    };
    await refresh();
    return page.nextPageToken;
  });
  fill(main, h("h1", {}, "Messages"), status, listing, pager.element);
  await pager.first().catch((error) => fill(status, problem(error)));
}

const states = ["failed", "pending", "delivered"];

export async function messageDetail(main, { signal }, id) {
  let chosen;
  let timer;
  signal.addEventListener("abort", () => clearTimeout(timer));
  const summary = h("section", { class: "card", id: "delivery-summary" });
  const tabs = h("div", { class: "tabs", role: "group", "aria-label": "Deliveries in state" });
  const listing = h("div");
  const pager = new Pager(async (pageToken, current) => {
    const page = await get(`/api/messages/${part(id)}/deliveries`, { state: chosen, pageSize: 100, pageToken });
    if (signal.aborted || !current()) return undefined;
    fill(listing, table({
      caption: `Recipients ${chosen}`,
      columns: [
        { label: "Token", className: "token", value: (delivery) => h("a", { href: `#/tokens/${segment(delivery.token)}` }, delivery.token) },
        { label: "State", value: (delivery) => h("span", { class: `badge ${delivery.state}` }, delivery.state) },
        { label: "FCM's error", value: (delivery) => delivery.error || "—" },
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
  fill(tabs, states.map((state) => h("button", { type: "button", dataset: { state }, "aria-pressed": "false", onclick: () => choose(state) }, state)));

  const message = await get(`/api/messages/${part(id)}`);
  if (signal.aborted) return;
  let payload;
  try { payload = JSON.stringify(JSON.parse(message.payload), null, 2); } catch { payload = message.payload; }
  fill(main,
    h("p", {}, h("a", { href: "#/messages" }, "← Messages")),
    h("h1", {}, "Message"),
    h("section", { class: "card" }, facts([
      ["Id", h("code", {}, message.id)],
      ["Protocol", message.protocol],
      ["Target", message.target],
      ["Received", when(message.receivedAt)],
      ["Recipients", count(message.recipientCount)],
    ])),
    h("h2", {}, "Delivery"),
    summary,
    message.delivery ? [tabs, listing, pager.element] : null,
    h("h2", {}, "Payload, as fcm-registry understood it"),
    h("pre", {}, payload));

  const showDelivery = (delivery) => fill(summary, delivery
    ? stats([["Pending", delivery.pending, "pending"], ["Delivered", delivery.delivered, "delivered"], ["Failed", delivery.failed, "failed"]])
    : h("p", { class: "muted" }, "Not relayed: the project did not deliver through FCM when this message came, or it was a dry run."));
  showDelivery(message.delivery);
  if (!message.delivery) return;
  choose(message.delivery.failed ? "failed" : message.delivery.pending ? "pending" : "delivered");
  // While recipients wait, the counts (and the list shown) follow them.
  const refresh = async () => {
    try {
      const now = await get(`/api/messages/${part(id)}`);
      if (signal.aborted) return;
      showDelivery(now.delivery);
      if (pager.page === 1) await pager.show();
      if (now.delivery && now.delivery.pending) timer = setTimeout(refresh, refreshEvery);
    } catch (error) {
      if (!signal.aborted) fill(summary, problem(error));
    }
  };
  if (message.delivery.pending) timer = setTimeout(refresh, refreshEvery);
}
