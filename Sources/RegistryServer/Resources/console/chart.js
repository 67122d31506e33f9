// Charts as inline SVG, no library: bars for the largest topics, lines over time for the server's
// per-minute counts. Each has gridlines, labelled axes, a text alternative, and a value to read
// under the pointer.
import { count, h, s, segment } from "./dom.js";

/** Rounds a chart's top up to 1, 2 or 5 times a power of ten, so gridlines fall on round numbers. */
function niceTop(value) {
  if (value <= 4) return 4;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

/** Horizontal bars: `items` are `{label, value, href}`, largest first; each label links to its screen. */
export function barChart(items, { title, empty }) {
  // 420 units wide: on a phone (about 330 px) its 12-unit text is still 9 px, on a desktop half about 15.
  const width = 420, rowHeight = 26, labelWidth = 120, valueWidth = 64, top = 4, axis = 18;
  const height = Math.max(items.length, 1) * rowHeight + top + axis;
  const largest = niceTop(Math.max(1, ...items.map((item) => item.value)));
  const room = width - labelWidth - valueWidth;
  const x = (value) => labelWidth + (value / largest) * room;
  const grid = [0, 0.25, 0.5, 0.75, 1].map((share) => {
    const at = x(share * largest);
    return s("g", { class: "grid" },
      s("line", { x1: at, y1: top, x2: at, y2: height - axis }),
      s("text", { x: at, y: height - 4, "text-anchor": "middle" }, count(share * largest)));
  });
  const rows = items.map((item, index) => {
    const y = top + index * rowHeight;
    const label = item.label.length > 16 ? `${item.label.slice(0, 15)}…` : item.label;
    return s("a", { href: item.href, "aria-label": `${item.label}: ${count(item.value)}` },
      s("title", {}, `${item.label}: ${count(item.value)}`),
      s("text", { class: "label", x: labelWidth - 8, y: y + 17, "text-anchor": "end" }, label),
      s("rect", { class: "bar-rect", x: labelWidth, y: y + 4, height: rowHeight - 8, width: Math.max(2, x(item.value) - labelWidth), rx: 3 }),
      s("text", { x: x(item.value) + 6, y: y + 17 }, count(item.value)));
  });
  return s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title },
    s("title", {}, title),
    items.length ? [grid, rows] : s("text", { x: 8, y: 20 }, empty || "No data yet."));
}

const clock = new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit" });

/**
 * Lines over a time window: `series` are `{name, className, values}` where `values` maps a
 * bucket's start (epoch ms) to its count; the window is `from`…`to` in buckets of `step` ms.
 * Hovering (or touching) shows the bucket's time and values in `readout`.
 */
export function timeChart(series, { title, from, to, step, ticks }) {
  const width = 420, height = 170, left = 44, right = 10, top = 10, bottom = 22;
  const buckets = [];
  for (let at = from; at < to; at += step) buckets.push(at);
  const largest = niceTop(Math.max(1, ...series.flatMap((line) => buckets.map((at) => line.values.get(at) || 0))));
  const x = (at) => left + ((at - from) / Math.max(1, to - from - step)) * (width - left - right);
  const y = (value) => top + (1 - value / largest) * (height - top - bottom);
  const horizontal = [0, 0.5, 1].map((share) => s("g", { class: "grid" },
    s("line", { x1: left, y1: y(share * largest), x2: width - right, y2: y(share * largest) }),
    s("text", { x: left - 6, y: y(share * largest) + 4, "text-anchor": "end" }, count(share * largest))));
  const vertical = [];
  for (let at = Math.ceil(from / ticks) * ticks; at < to; at += ticks) {
    vertical.push(s("g", { class: "grid" },
      s("line", { x1: x(at), y1: top, x2: x(at), y2: height - bottom }),
      s("text", { x: x(at), y: height - 6, "text-anchor": "middle" }, clock.format(new Date(at)))));
  }
  const lines = series.map((line) => s("polyline", { class: `line ${line.className}`,
    points: buckets.map((at) => `${x(at).toFixed(1)},${y(line.values.get(at) || 0).toFixed(1)}`).join(" ") }));
  const guide = s("line", { class: "guide", x1: 0, y1: top, x2: 0, y2: height - bottom, visibility: "hidden" });
  const nonzero = buckets.filter((at) => series.some((line) => line.values.get(at))).length;
  const readout = h("p", { class: "readout muted" }, "Point at the chart (or touch it) to read its values.");
  const svg = s("svg", { class: "chart time", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title,
      dataset: { nonzero: String(nonzero), buckets: String(buckets.length) } },
    s("title", {}, title), horizontal, vertical, lines, guide);
  const point = (event) => {
    const box = svg.getBoundingClientRect();
    const unitX = ((event.clientX - box.left) / box.width) * width;
    const index = Math.round(((unitX - left) / (width - left - right)) * (buckets.length - 1));
    const at = buckets[Math.min(buckets.length - 1, Math.max(0, index))];
    if (at === undefined) return;
    guide.setAttribute("x1", x(at)); guide.setAttribute("x2", x(at)); guide.setAttribute("visibility", "visible");
    const span = step > 60_000 ? `${clock.format(new Date(at))}–${clock.format(new Date(at + step))}` : clock.format(new Date(at));
    readout.textContent = `${span} · ${series.map((line) => `${line.name} ${count(line.values.get(at) || 0)}`).join(" · ")}`;
  };
  svg.addEventListener("pointermove", point);
  svg.addEventListener("pointerdown", point);
  svg.addEventListener("pointerleave", () => guide.setAttribute("visibility", "hidden"));
  const legend = h("p", { class: "legend" }, series.map((line) => h("span", { class: `key ${line.className}` }, line.name)));
  return [svg, legend, readout];
}

/** A chart and its caption in a card, with what else goes with it. */
export function figure(caption, ...content) {
  return h("figure", { class: "card" }, h("figcaption", {}, h("h2", {}, caption)), content);
}

/** The link to a topic's screen, for bars. */
export const topicHref = (name) => `#/topics/${segment(name)}`;
