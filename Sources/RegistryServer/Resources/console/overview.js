// The first screen: the project's size, its largest topics, deliveries per minute and the latest messages.
import { get } from "./api.js";
import { barChart, figure, lineChart } from "./chart.js";
import { count, fill, h, segment, stats, when } from "./dom.js";
import { deliveryRate } from "./relay.js";

export async function overview(main, { project, signal }) {
  const [size, top, messages] = await Promise.all([
    get("/api/project"),
    get("/api/topics", { orderBy: "subscriberCount", pageSize: 10 }),
    get("/api/messages", { pageSize: 5 }),
  ]);
  if (signal.aborted) return;
  const rateFigure = h("div");
  const drawRate = () => fill(rateFigure, figure("Deliveries per minute",
    lineChart(deliveryRate(), { title: "Deliveries per minute, measured while this tab is open", unit: "per min" })));
  drawRate();
  const timer = setInterval(drawRate, 5000);
  signal.addEventListener("abort", () => clearInterval(timer));
  fill(main,
    h("h1", {}, `Project ${project.projectId}`),
    h("section", { class: "card", "aria-label": "Size" },
      stats([["Registered tokens", size.registeredTokens, "registeredTokens"], ["Topics with subscribers", size.topics, "topics"], ["Sender id", size.senderId]])),
    h("div", { class: "grid" },
      figure("Top topics by subscribers",
        barChart(top.topics.map((topic) => ({ label: topic.name, value: topic.subscriberCount })),
          { title: `The ${top.topics.length} largest topics by subscribers` }),
        h("ol", { class: "ranking" }, top.topics.map((topic) => h("li", {},
          h("a", { href: `#/topics/${segment(topic.name)}` }, topic.name), " ",
          h("span", { class: "muted" }, `${count(topic.subscriberCount)} subscribers`))))),
      rateFigure),
    h("h2", {}, "Latest messages"),
    h("ul", {}, messages.messages.length
      ? messages.messages.map((message) => h("li", {},
          h("a", { href: `#/messages/${segment(message.id)}` }, message.target), " ",
          h("span", { class: "muted" }, `${message.protocol} · ${count(message.recipientCount)} recipients · ${when(message.receivedAt)}`)))
      : h("li", { class: "muted" }, "No message logged yet.")));
}
