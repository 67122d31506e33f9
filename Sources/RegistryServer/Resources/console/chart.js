// Two small charts as inline SVG, no library: bars for the largest topics, a line for a rate.
// Each is an image with a text alternative, and the figures it draws are also in the page as text.
import { count, h, s } from "./dom.js";

/** Horizontal bars: `items` are `{label, value}`, largest first. An image: the page gives the figures as text too. */
export function barChart(items, { title }) {
  // 420 units wide: on a phone (about 330 px) its 12-unit text is still 9 px, on a desktop half about 15.
  const width = 420, rowHeight = 26, labelWidth = 120, valueWidth = 70;
  const height = Math.max(items.length, 1) * rowHeight + 8;
  const largest = Math.max(1, ...items.map((item) => item.value));
  const room = width - labelWidth - valueWidth;
  const rows = items.map((item, index) => {
    const y = 4 + index * rowHeight;
    const label = item.label.length > 16 ? `${item.label.slice(0, 15)}…` : item.label;
    return s("g", {},
      s("title", {}, `${item.label}: ${count(item.value)}`),
      s("text", { x: labelWidth - 8, y: y + 17, "text-anchor": "end" }, label),
      s("rect", { class: "bar-rect", x: labelWidth, y: y + 4, height: rowHeight - 8, width: Math.max(2, (item.value / largest) * room), rx: 3 }),
      s("text", { x: labelWidth + Math.max(2, (item.value / largest) * room) + 6, y: y + 17 }, count(item.value)));
  });
  return s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title },
    s("title", {}, title),
    items.length ? rows : s("text", { x: 8, y: 20 }, "No data yet."));
}

/** A line over time: `points` are `{at: Date, value}`, oldest first. */
export function lineChart(points, { title, unit }) {
  const width = 420, height = 160, left = 56, bottom = 24, top = 10, right = 12;
  const largest = Math.max(1, ...points.map((point) => point.value));
  const first = points.length ? points[0].at.getTime() : 0;
  const last = points.length ? points[points.length - 1].at.getTime() : 1;
  const span = Math.max(1, last - first);
  const x = (at) => left + ((at.getTime() - first) / span) * (width - left - right);
  const y = (value) => top + (1 - value / largest) * (height - top - bottom);
  const path = points.map((point) => `${x(point.at).toFixed(1)},${y(point.value).toFixed(1)}`).join(" ");
  const time = (at) => at.toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit" });
  return s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title },
    s("title", {}, title),
    s("line", { class: "axis", x1: left, y1: height - bottom, x2: width - right, y2: height - bottom }),
    s("line", { class: "axis", x1: left, y1: top, x2: left, y2: height - bottom }),
    s("text", { x: left - 6, y: top + 10, "text-anchor": "end" }, count(Math.round(largest))),
    s("text", { x: left - 6, y: height - bottom, "text-anchor": "end" }, "0"),
    s("text", { x: left - 6, y: top + 26, "text-anchor": "end" }, unit),
    points.length > 1
      ? [s("polyline", { class: "line", points: path }),
         s("text", { x: left, y: height - 6 }, time(points[0].at)),
         s("text", { x: width - right, y: height - 6, "text-anchor": "end" }, time(points[points.length - 1].at))]
      : s("text", { x: left + 10, y: height / 2 }, "Measuring: the rate shows after two readings."));
}

/** A chart and its caption in a card, with what else goes with it (the figures as text). */
export function figure(caption, ...content) {
  return h("figure", { class: "card" }, h("figcaption", {}, h("h2", {}, caption)), content);
}
