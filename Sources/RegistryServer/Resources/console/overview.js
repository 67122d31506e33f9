// The first screen: the project's size, the last day's messages and deliveries (kept by the
// server), its largest topics, how fresh its tokens are under its token policy, and the latest
// messages; everything refreshes while it is shown.
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
  const freshness = h("div", { id: "token-freshness" });
  const refresh = async () => {
    const [counts, topics, messages, seen] = await Promise.all([
      get("/api/project"),
      get("/api/topics", { orderBy: "subscriberCount", pageSize: 10 }),
      get("/api/messages", { pageSize: 5 }),
      get("/api/tokens:freshness"),
      history.refresh(),
    ]);
    if (signal.aborted) return;
    document.dispatchEvent(new CustomEvent("delivery", { detail: counts.delivery }));
    refill(size, stats([["Registered tokens", counts.registeredTokens, "registeredTokens"], ["Topics with subscribers", counts.topics, "topics"], ["Sender id", counts.senderId]]));
    refill(top, figure("Largest topics",
      barChart(topics.topics.map((topic) => ({ label: topic.name, value: topic.subscriberCount, href: topicHref(topic.name) })),
        { title: `The ${topics.topics.length} largest topics by subscribers; each bar opens its topic`, empty: "No topic has a subscriber yet." })));
    refill(freshness, freshnessFigure(seen));
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
    freshness,
    h("div", { class: "split" }, h("h2", {}, "Latest messages"), h("a", { href: "#/messages" }, "All messages")),
    latest);
  live(signal, refresh, overviewEvery);
}

/** "2592000s" → "30 days"; whole hours below a day. */
function days(duration) {
  const seconds = Number.parseInt(duration, 10);
  if (!Number.isFinite(seconds)) return duration;
  if (seconds % 86400 === 0) return `${seconds / 86400} day${seconds === 86400 ? "" : "s"}`;
  return `${Math.round(seconds / 3600)} hours`;
}

/** The tokens by month last seen (GET /api/tokens:freshness) as bars, with the policy they are counted under. */
function freshnessFigure(seen) {
  const policy = seen.tokenPolicy;
  const last = seen.byMonth.length - 1;
  const items = seen.byMonth.map((value, month) => ({
    label: month === last ? `${month}+ months ago` : `${month}–${month + 1} months ago`,
    value,
  }));
  return figure("Token freshness",
    stats([["Fresh", seen.fresh, "fresh"], ["Stale", seen.stale, "stale"], ["Expiring within 7 days", seen.expiring7d, "expiring7d"]]),
    barChart(items, { title: "Registered tokens by when they were last seen, in months of 30 days", empty: "No registered token yet." }),
    h("p", { class: "muted", id: "token-policy" },
      `Stale after ${days(policy.staleAfter)} without checking in; `,
      policy.expireAfter ? `unregistered after ${days(policy.expireAfter)}; ` : "never expire; ",
      policy.sendToStale ? "fan-outs still reach stale tokens." : "fan-outs skip stale tokens."));
}
