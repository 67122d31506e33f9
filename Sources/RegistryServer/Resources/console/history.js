// The server's per-minute counts (`GET /api/stats`), drawn as lines over the last hour or day:
// what the project accepted, delivered, failed and pruned, kept by the server for every tab. Each
// count has a chart of its own: messages (hundreds) and deliveries (a hundred thousand) on one
// scale would leave all but the largest flat at zero.
import { get } from "./api.js";
import { timeChart } from "./chart.js";
import { count, fill, h, problem } from "./dom.js";

/** The windows a chart offers: the API's window, the bucket it is drawn in, and the tick spacing. */
const windows = {
  "1h": { label: "Last hour", span: 3_600_000, step: 60_000, ticks: 15 * 60_000 },
  "24h": { label: "Last 24 hours", span: 86_400_000, step: 15 * 60_000, ticks: 6 * 3_600_000 },
};
let chosen = "24h";

/** The series drawn, by the API's field names. */
const series = [
  ["accepted", "Messages accepted"],
  ["delivered", "Delivered"],
  ["failed", "Failed"],
  ["pruned", "Tokens pruned"],
];

/** How often a shown chart asks again: its finest bucket is a minute. */
const historyEvery = 30_000;

/**
 * A card with the chart and its window switch; `refresh()` asks the server again and redraws, at
 * most every 30 s unless the window changed. The totals over the window go beside it as text.
 */
export function historyCard() {
  const body = h("div", { id: "history" });
  const heading = h("h2", {}, windows[chosen].label);
  const buttons = Object.entries(windows).map(([name, { label }]) =>
    h("button", { type: "button", class: "plain small", dataset: { window: name, key: `window-${name}` }, "aria-pressed": String(name === chosen),
      onclick: () => { chosen = name; heading.textContent = windows[name].label; buttons.forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.window === name))); refresh(); } },
      label.replace("Last ", "")));
  const card = h("figure", { class: "card history" },
    h("figcaption", { class: "split" }, heading, h("div", { class: "tabs", role: "group", "aria-label": "Window" }, buttons)),
    body);
  let askedAt = 0;
  let shownWindow = null;
  const refresh = async () => {
    if (shownWindow === chosen && Date.now() - askedAt < historyEvery) return;
    askedAt = Date.now();
    shownWindow = chosen;
    const shape = windows[chosen];
    let answer;
    try {
      answer = await get("/api/stats", { window: chosen });
    } catch (error) {
      fill(body, problem(error));
      return;
    }
    // Buckets end at the next whole step, so the newest minute is always drawn.
    const to = Math.ceil((Date.now() + 1) / shape.step) * shape.step;
    const from = to - shape.span;
    const values = Object.fromEntries(series.map(([name]) => [name, new Map()]));
    for (const minute of answer.minutes) {
      const at = Math.floor(Date.parse(minute.at) / shape.step) * shape.step;
      for (const [name] of series) values[name].set(at, (values[name].get(at) || 0) + (minute[name] || 0));
    }
    const drawn = series.filter(([name]) => name !== "pruned" || answer.totals.pruned);
    fill(body,
      timeChart(drawn.map(([name, label]) => ({ name: label, className: name, values: values[name] })),
        { title: `${shape.label}: messages accepted and deliveries, ${shape.step === 60_000 ? "a minute" : "every 15 minutes"}, each on its own scale`, from, to, step: shape.step, ticks: shape.ticks }),
      h("p", { class: "totals" }, series.map(([name, label]) =>
        h("span", { dataset: { total: name } }, `${label} `, h("strong", {}, count(answer.totals[name]))))));
  };
  return { card, refresh };
}
