// Building the page: every value from the API goes in as text or an attribute, never as HTML,
// so nothing a token, topic or message holds can run in the console.

/** An element: `h("a", {href: "#/x"}, "text", child)`. `on*` attributes become listeners. */
export function h(tag, attributes = {}, ...children) {
  return build(document.createElement(tag), attributes, children);
}

/** An SVG element, for the charts. */
export function s(tag, attributes = {}, ...children) {
  return build(document.createElementNS("http://www.w3.org/2000/svg", tag), attributes, children);
}

function build(element, attributes, children) {
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(element.dataset, value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces what `element` holds. */
export function fill(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

const counts = new Intl.NumberFormat("en");
/** 1234567 → "1,234,567". */
export function count(value) {
  return typeof value === "number" ? counts.format(value) : "—";
}

/** One formatter for every time shown: making one per call costs more than a 2,000-row page's layout. */
const times = new Intl.DateTimeFormat("en-GB", { dateStyle: "medium", timeStyle: "medium" });
/** An RFC 3339 time as the reader's local date and time. */
export function when(text) {
  if (!text) return "—";
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? text : times.format(date);
}

/** A hash route segment: tokens, topics and message ids may hold "/", ":" and "%". */
export function segment(value) {
  return encodeURIComponent(value);
}

/** `{label: value}` as a list of figures; `dataset` names go on each value for tests to read. */
export function stats(entries) {
  return h("dl", { class: "stats" },
    entries.map(([label, value, name]) =>
      h("div", { class: name },
        h("dt", {}, label),
        h("dd", { dataset: name ? { stat: name, value: String(value ?? "") } : undefined }, typeof value === "number" ? count(value) : value ?? "—"))));
}

/** `[[term, description], …]` as a definition list. */
export function facts(entries) {
  return h("dl", { class: "facts" }, entries.map(([term, description]) => [h("dt", {}, term), h("dd", {}, description)]));
}

/**
 * A table. `columns`: `{label, value(row) → node or text, numeric?, sort?}`; a column with `sort`
 * (a key) gets a button that calls `onSort(key)`; `sorted` is `{key, descending}`.
 */
export function table({ caption, columns, rows, sorted, onSort, empty = "Nothing here." }) {
  const head = h("tr", {}, columns.map((column) => {
    const sort = column.sort && sorted && sorted.key === column.sort ? (sorted.descending ? "descending" : "ascending") : undefined;
    const label = column.sort && onSort
      ? h("button", { type: "button", onclick: () => onSort(column.sort) }, column.label)
      : column.label;
    return h("th", { scope: "col", class: column.numeric ? "num" : column.className, "aria-sort": sort }, label);
  }));
  const body = rows.length
    ? rows.map((row) => h("tr", {}, columns.map((column) =>
        h("td", { class: column.numeric ? "num" : column.className }, column.value(row)))))
    : h("tr", {}, h("td", { colspan: columns.length, class: "muted" }, empty));
  return h("div", { class: "table-wrap" }, h("table", {}, caption ? h("caption", {}, caption) : null, h("thead", {}, head), h("tbody", {}, body)));
}

/**
 * Paging by the API's page tokens: remembers the tokens of the pages before, so Previous works
 * in listings that only go forward. `load(pageToken, current)` shows a page, if `current()` still
 * says it is the latest load, and returns its nextPageToken.
 */
export class Pager {
  constructor(load) {
    this.load = load;
    this.tokens = [undefined];
    this.next = undefined;
    this.loads = 0;
    this.busy = false;
    this.element = h("div", { class: "pager" });
  }

  get page() { return this.tokens.length; }

  async first() {
    this.tokens = [undefined];
    await this.show();
  }

  /**
   * Shows the current page; a failed call is shown where the pager is, and Previous still works.
   * Only the latest load counts: an answer to an earlier one (a search typed since) is dropped,
   * and the buttons wait while a page loads.
   */
  async show() {
    const load = ++this.loads;
    this.busy = true;
    this.render();
    let next, failure;
    try {
      next = await this.load(this.tokens[this.tokens.length - 1], () => load === this.loads);
    } catch (error) {
      failure = error;
    }
    if (load !== this.loads) return;
    this.busy = false;
    this.next = next;
    this.render();
    if (failure) this.element.append(problem(failure));
  }

  /**
   * Shows the current page again (a live screen's refresh): the buttons stay the elements they
   * were, so a focused one keeps its focus, and a failed refresh leaves the page as it was.
   */
  async refresh() {
    if (this.busy) return;
    const load = this.loads;
    try {
      const next = await this.load(this.tokens[this.tokens.length - 1], () => load === this.loads && !this.busy);
      if (load !== this.loads || this.busy) return;
      this.next = next;
      this.render();
    } catch {
      // The next refresh tries again; what is on screen stays.
    }
  }

  render() {
    if (!this.buttons) {
      this.buttons = {
        previous: h("button", { type: "button", class: "plain", onclick: () => { this.tokens.pop(); this.show(); } }, "Previous"),
        label: h("span", { class: "muted" }),
        next: h("button", { type: "button", class: "plain", onclick: () => { this.tokens.push(this.next); this.show(); } }, "Next"),
      };
    }
    const { previous, label, next } = this.buttons;
    previous.disabled = this.busy || this.tokens.length === 1;
    next.disabled = this.busy || !this.next;
    label.dataset.page = String(this.page);
    label.textContent = `Page ${this.page}`;
    fill(this.element, previous, label, next);
    // A page of one needs no paging controls.
    this.element.hidden = this.tokens.length === 1 && !this.next && !this.busy;
  }
}

/**
 * Runs `work` every `every` ms while the screen is shown and the tab is visible (the Page
 * Visibility API): a hidden tab asks nothing, and one shown again asks at once. A refresh never
 * overlaps the one before. Stops when `signal` aborts.
 */
export function live(signal, work, every) {
  let timer;
  let running = false;
  const tick = async () => {
    clearTimeout(timer);
    if (signal.aborted || document.visibilityState !== "visible") return;
    if (!running) {
      running = true;
      try { await work(); } catch { /* the next round tries again */ } finally { running = false; }
    }
    if (!signal.aborted && document.visibilityState === "visible") timer = setTimeout(tick, every);
  };
  const visibility = () => { if (document.visibilityState === "visible") tick(); else clearTimeout(timer); };
  document.addEventListener("visibilitychange", visibility);
  signal.addEventListener("abort", () => { clearTimeout(timer); document.removeEventListener("visibilitychange", visibility); });
  timer = setTimeout(tick, every);
}

/**
 * Replaces what `element` holds, keeping the user's place: focus returns to the control that
 * matches the one focused before (same link, same button), and the scroll of a wide table stays.
 */
export function refill(element, ...children) {
  const focused = element.contains(document.activeElement) ? identify(document.activeElement) : null;
  const scrolls = [...element.querySelectorAll(".table-wrap")].map((wrap) => wrap.scrollLeft);
  fill(element, ...children);
  element.querySelectorAll(".table-wrap").forEach((wrap, index) => { if (scrolls[index]) wrap.scrollLeft = scrolls[index]; });
  if (focused) {
    const match = [...element.querySelectorAll(focused.tag)].find((candidate) => identify(candidate).key === focused.key);
    if (match) match.focus({ preventScroll: true });
  }
  return element;
}

function identify(element) {
  return { tag: element.tagName.toLowerCase(), key: element.getAttribute("href") || element.id || element.dataset.key || element.textContent };
}

/** Runs `work` after `delay` ms without another call (typing in a search box), until `signal` aborts. */
export function debounce(work, delay, signal) {
  let timer;
  signal?.addEventListener("abort", () => clearTimeout(timer));
  return (...values) => {
    clearTimeout(timer);
    if (!signal?.aborted) timer = setTimeout(() => work(...values), delay);
  };
}

/** An error as the API worded it, in a box. */
export function problem(error) {
  return h("p", { class: "error-box", role: "alert" }, error.message || String(error));
}
