// The first screen: the project's size, the last day's messages and deliveries (kept by the
// server), its largest topics and the latest messages; everything refreshes while it is shown.
import { get } from "./api.js";
import { barChart, figure, topicHref } from "./chart.js";
import { fill, h, live, refill, stats } from "./dom.js";
import { historyCard } from "./history.js";
import { messageTable } from "./messages.js";

/** How often the Overview asks again while it is shown. */
export const overviewEvery = 5000;

export async function overview(main, { project, signal }) {
  const size = h("section", { class: "card", "aria-label": "Size" });
  const top = h("div");
  const latest = h("div", { id: "latest-messages" });
  const history = historyCard();
  const refresh = async () => {
    const [counts, topics, messages] = await Promise.all([
      get("/api/project"),
      get("/api/topics", { orderBy: "subscriberCount", pageSize: 10 }),
      get("/api/messages", { pageSize: 5 }),
      history.refresh(),
    ]);
    if (signal.aborted) return;
    document.dispatchEvent(new CustomEvent("delivery", { detail: counts.delivery }));
    refill(size, stats([["Registered tokens", counts.registeredTokens, "registeredTokens"], ["Topics with subscribers", counts.topics, "topics"], ["Sender id", counts.senderId]]));
    refill(top, figure("Largest topics",
      barChart(topics.topics.map((topic) => ({ label: topic.name, value: topic.subscriberCount, href: topicHref(topic.name) })),
        { title: `The ${topics.topics.length} largest topics by subscribers; each bar opens its topic`, empty: "No topic has a subscriber yet." })));
    refill(latest, messageTable(messages.messages, {
      caption: "The five latest messages, newest first",
      empty: [h("span", {}, "No message yet. "), h("a", { href: "#/compose" }, "Send a test message"), "."],
    }));
  };
  await refresh();
  if (signal.aborted) return;
  fill(main,
    h("div", { class: "split" }, h("h1", {}, `Project ${project.projectId}`), h("a", { class: "button", "data-needs": "send", href: "#/compose" }, "Send a message")),
    size,
    h("div", { class: "grid" }, history.card, top),
    h("div", { class: "split" }, h("h2", {}, "Latest messages"), h("a", { href: "#/messages" }, "All messages")),
    latest);
  live(signal, refresh, overviewEvery);
}
