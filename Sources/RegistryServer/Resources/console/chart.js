// Charts as inline SVG, no library: bars for the largest topics, lines over time for the server's
// per-minute counts (a chart of its own for each count, on its own scale). Each has gridlines,
// labelled axes in short numbers (100K), a text alternative, and a value to read under the pointer.
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
      s("text", { class: "axis x", x: at, y: height - 4, "text-anchor": "middle" }, axisNumber(share * largest)));
  });
  const rows = items.map((item, index) => {
    const y = top + index * rowHeight;
    const label = item.label.length > 16 ? `${item.label.slice(0, 15)}…` : item.label;
    return s("a", { href: item.href, "aria-label": `${item.label}: ${count(item.value)}` },
      s("title", {}, `${item.label}: ${count(item.value)}`),
      s("text", { class: "label", x: labelWidth - 8, y: y + 17, "text-anchor": "end" }, label),
      s("rect", { class: "bar-rect", x: labelWidth, y: y + 4, height: rowHeight - 8, width: Math.max(2, x(item.value) - labelWidth), rx: 3 }),
      // A million and more in short (1.2M), so the value stays inside the chart; its title is exact.
      s("text", { x: x(item.value) + 6, y: y + 17 }, item.value < 1_000_000 ? count(item.value) : axisNumber(item.value)));
  });
  return s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title },
    s("title", {}, title),
    items.length ? [grid, rows] : s("text", { x: 8, y: 20 }, empty || "No data yet."));
}

const clock = new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit" });
const compact = new Intl.NumberFormat("en", { notation: "compact", maximumFractionDigits: 1 });
/** An axis's number, short enough for its margin: 950, 1.2K, 100K, 3.4M. */
export function axisNumber(value) {
  return value < 1000 ? count(value) : compact.format(value);
}

/** Where an axis label at `at` is anchored, so that it stays inside `0…width` whatever its length. */
function anchor(at, width, room = 18) {
  if (at < room) return "start";
  if (at > width - room) return "end";
  return "middle";
}

/**
 * Counts over a time window, one small chart per series, one above the other on the same time
 * axis: each has its own scale, so a series of hundreds (messages) is as readable as one of a
 * hundred thousand (deliveries) instead of lying flat under it. `series` are `{name, className,
 * values}` where `values` maps a bucket's start (epoch ms) to its count; the window is
 * `from`…`to` in buckets of `step` ms. Pointing at (or touching) any chart shows that bucket's
 * time and every series' value in the readout, with a guide across every chart.
 */
export function timeChart(series, { title, from, to, step, ticks }) {
  const width = 420, height = 96, left = 44, right = 22, top = 10, bottom = 20;
  const buckets = [];
  for (let at = from; at < to; at += step) buckets.push(at);
  const x = (at) => left + ((at - from) / Math.max(1, to - from - step)) * (width - left - right);
  const readout = h("p", { class: "readout muted" }, "Point at a chart (or touch it) to read its values.");
  const guides = [];
  const point = (svg, event) => {
    const box = svg.getBoundingClientRect();
    const unitX = ((event.clientX - box.left) / box.width) * width;
    const index = Math.round(((unitX - left) / (width - left - right)) * (buckets.length - 1));
    const at = buckets[Math.min(buckets.length - 1, Math.max(0, index))];
    if (at === undefined) return;
    for (const guide of guides) { guide.setAttribute("x1", x(at)); guide.setAttribute("x2", x(at)); guide.setAttribute("visibility", "visible"); }
    const span = step > 60_000 ? `${clock.format(new Date(at))}–${clock.format(new Date(at + step))}` : clock.format(new Date(at));
    readout.textContent = `${span} · ${series.map((line) => `${line.name} ${count(line.values.get(at) || 0)}`).join(" · ")}`;
  };
  const panels = series.map((line) => {
    const peak = Math.max(0, ...buckets.map((at) => line.values.get(at) || 0));
    // A count of one or two tops out at 2 (gridlines 0, 1, 2): a single failure stands half high.
    const largest = peak <= 2 ? 2 : niceTop(peak);
    const y = (value) => top + (1 - value / largest) * (height - top - bottom);
    const horizontal = [0, 0.5, 1].map((share) => {
      const value = share * largest;
      return s("g", { class: "grid" },
        s("line", { x1: left, y1: y(value), x2: width - right, y2: y(value) }),
        // A half that is no whole number (2.5) keeps its gridline and goes unlabelled.
        Number.isInteger(value) ? s("text", { class: "axis y", x: left - 6, y: y(value) + 4, "text-anchor": "end" }, axisNumber(value)) : null);
    });
    const vertical = [];
    for (let at = Math.ceil(from / ticks) * ticks; at < to; at += ticks) {
      vertical.push(s("g", { class: "grid" },
        s("line", { x1: x(at), y1: top, x2: x(at), y2: height - bottom }),
        s("text", { class: "axis x", x: x(at), y: height - 6, "text-anchor": anchor(x(at), width) }, clock.format(new Date(at)))));
    }
    const guide = s("line", { class: "guide", x1: 0, y1: top, x2: 0, y2: height - bottom, visibility: "hidden" });
    guides.push(guide);
    const nonzero = buckets.filter((at) => line.values.get(at)).length;
    const total = buckets.reduce((sum, at) => sum + (line.values.get(at) || 0), 0);
    const svg = s("svg", { class: "chart time", viewBox: `0 0 ${width} ${height}`, role: "img",
        "aria-label": `${line.name}: ${count(total)} in all, at most ${count(peak)} in ${step > 60_000 ? "a quarter of an hour" : "a minute"}`,
        dataset: { series: line.className, nonzero: String(nonzero), buckets: String(buckets.length), peak: String(peak) } },
      s("title", {}, `${title}: ${line.name}`), horizontal, vertical,
      s("polyline", { class: `line ${line.className}`,
        points: buckets.map((at) => `${x(at).toFixed(1)},${y(line.values.get(at) || 0).toFixed(1)}`).join(" ") }),
      guide);
    svg.addEventListener("pointermove", (event) => point(svg, event));
    svg.addEventListener("pointerdown", (event) => point(svg, event));
    svg.addEventListener("pointerleave", () => guides.forEach((each) => each.setAttribute("visibility", "hidden")));
    return h("div", { class: "panel" }, h("p", { class: "panel-name" }, h("span", { class: `key ${line.className}` }, line.name)), svg);
  });
  return [h("div", { class: "panels", role: "group", "aria-label": title }, panels), readout];
}

/** A chart and its caption in a card, with what else goes with it. */
export function figure(caption, ...content) {
  return h("figure", { class: "card" }, h("figcaption", {}, h("h2", {}, caption)), content);
}

/** The link to a topic's screen, for bars. */
export const topicHref = (name) => `#/topics/${segment(name)}`;
