// Topics and device groups: lists with counts (searched by name prefix, paged through any number),
// and each topic's subscribers and group's members.
import { get, part } from "./api.js";
import { count, debounce, facts, fill, h, Pager, problem, segment, table, when } from "./dom.js";

/** How each listing was left, so coming back to it keeps the search and order. */
const state = { topics: { prefix: "", orderBy: "subscriberCount" }, groups: { prefix: "", sorted: { key: "name", descending: false } } };

/** A search box that calls `onSearch(prefix)` as the operator types. */
function prefixSearch(id, label, value, onSearch, signal) {
  const input = h("input", { id, type: "search", value, autocomplete: "off", spellcheck: "false" });
  input.addEventListener("input", debounce(() => onSearch(input.value), 200, signal));
  return h("div", { class: "grow" }, h("label", { for: id }, label), input);
}

/** When a page of rows was on screen after its answer came: what "responsive" is measured by. */
async function rendered(main, answeredAt) {
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  const milliseconds = Math.round(performance.now() - answeredAt);
  main.dataset.renderMs = String(milliseconds);
  return milliseconds;
}

export async function topicList(main, { signal }) {
  const listing = h("div");
  const status = h("div", { role: "status", "aria-live": "polite" });
  const pager = new Pager(async (pageToken, current) => {
    const { prefix, orderBy } = state.topics;
    const page = await get("/api/topics", { prefix, orderBy, pageSize: 50, pageToken });
    if (signal.aborted || !current()) return undefined;
    fill(listing, table({
      caption: prefix ? `Topics whose names start with “${prefix}”` : "All topics",
      columns: [
        { label: "Name", sort: "name", value: (topic) => h("a", { href: `#/topics/${segment(topic.name)}` }, topic.name) },
        { label: "Subscribers", sort: "subscriberCount", numeric: true, value: (topic) => count(topic.subscriberCount) },
        { label: "Created", value: (topic) => when(topic.createdAt) },
      ],
      rows: page.topics,
      sorted: { key: orderBy, descending: orderBy === "subscriberCount" },
      onSort: (key) => { state.topics.orderBy = key; reload(); },
      empty: prefix ? "No topic name starts with that." : "No topic has a subscriber.",
    }));
    return page.nextPageToken;
  });
  const reload = () => pager.first().catch((error) => fill(status, problem(error)));
  fill(main,
    h("h1", {}, "Topics"),
    h("div", { class: "row" },
      prefixSearch("topic-prefix", "Name starts with", state.topics.prefix, (prefix) => { state.topics.prefix = prefix; reload(); }, signal)),
    status, listing, pager.element);
  await pager.first();
}

export async function topicDetail(main, { signal }, name) {
  let pageSize = 100;
  const heading = h("section", { class: "card" });
  const listing = h("div");
  const timing = h("p", { class: "muted", id: "render-time" });
  const pager = new Pager(async (pageToken, current) => {
    const page = await get(`/api/topics/${part(name)}`, { pageSize, pageToken });
    const answeredAt = performance.now();
    if (signal.aborted || !current()) return undefined;
    fill(heading, facts([["Subscribers", h("span", { id: "topic-count", dataset: { count: String(page.subscriberCount) } }, count(page.subscriberCount))], ["Created", when(page.createdAt)]]));
    fill(listing, table({
      caption: `Subscribers ${count((pager.page - 1) * pageSize + 1)}–${count((pager.page - 1) * pageSize + page.subscribers.length)} of ${count(page.subscriberCount)}`,
      columns: [
        { label: "Token", className: "token", value: (member) => h("a", { href: `#/tokens/${segment(member.token)}` }, member.token) },
        { label: "Since", value: (member) => when(member.since) },
      ],
      rows: page.subscribers,
    }));
    const milliseconds = await rendered(main, answeredAt);
    fill(timing, `${count(page.subscribers.length)} rows on screen ${milliseconds} ms after the answer.`);
    return page.nextPageToken;
  });
  const size = h("select", { id: "page-size", onchange: () => { pageSize = Number(size.value); pager.first(); } },
    [100, 1000, 2000].map((value) => h("option", { value }, `${value} a page`)));
  fill(main,
    h("p", {}, h("a", { href: "#/topics" }, "← Topics")),
    h("h1", {}, `Topic ${name}`),
    heading,
    h("p", {}, h("a", { href: `#/conditions`, onclick: () => { sessionStorage.setItem("fcm-registry.condition", `'${name}' in topics`); } }, "Try it in a condition")),
    h("div", { class: "row" }, h("div", {}, h("label", { for: "page-size" }, "Page size"), size)),
    listing, pager.element, timing);
  await pager.first();
}

export async function groupList(main, { signal }) {
  const listing = h("div");
  const status = h("div", { role: "status", "aria-live": "polite" });
  let rows = [];
  const show = () => {
    const { key, descending } = state.groups.sorted;
    const sorted = [...rows].sort((a, b) => {
      const order = key === "memberCount" ? a.memberCount - b.memberCount : a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
      return descending ? -order : order;
    });
    fill(listing, table({
      caption: `${state.groups.prefix ? `Groups whose names start with “${state.groups.prefix}”` : "Groups"}, by name; the buttons sort this page`,
      columns: [
        { label: "Name", sort: "name", value: (group) => h("a", { href: `#/groups/${segment(group.name)}` }, group.name) },
        { label: "Members", sort: "memberCount", numeric: true, value: (group) => count(group.memberCount) },
        { label: "Created", value: (group) => when(group.createdAt) },
      ],
      rows: sorted,
      sorted: state.groups.sorted,
      onSort: (sortKey) => {
        const current = state.groups.sorted;
        state.groups.sorted = { key: sortKey, descending: current.key === sortKey ? !current.descending : sortKey === "memberCount" };
        show();
      },
      empty: state.groups.prefix ? "No group name starts with that." : "No device group yet.",
    }));
  };
  const pager = new Pager(async (pageToken, current) => {
    const page = await get("/api/groups", { prefix: state.groups.prefix, pageSize: 50, pageToken });
    if (signal.aborted || !current()) return undefined;
    rows = page.groups;
    show();
    return page.nextPageToken;
  });
  const reload = () => pager.first().catch((error) => fill(status, problem(error)));
  fill(main,
    h("h1", {}, "Device groups"),
    h("div", { class: "row" },
      prefixSearch("group-prefix", "Name starts with", state.groups.prefix, (prefix) => { state.groups.prefix = prefix; reload(); }, signal)),
    status, listing, pager.element);
  await pager.first();
}

export async function groupDetail(main, { project, signal }, name) {
  const key = h("span", { id: "notification-key" }, "…");
  const summary = h("section", { class: "card" });
  const listing = h("div");
  const pager = new Pager(async (pageToken, current) => {
    const page = await get(`/api/groups/${part(name)}`, { pageSize: 100, pageToken });
    if (signal.aborted || !current()) return undefined;
    fill(summary, facts([
      ["Members", h("span", { id: "group-count" }, count(page.memberCount))],
      ["Created", when(page.createdAt)],
      ["Notification key", key],
    ]));
    fill(listing, table({
      caption: `Members (${count(page.memberCount)})`,
      columns: [
        { label: "Token", className: "token", value: (member) => h("a", { href: `#/tokens/${segment(member.token)}` }, member.token) },
        { label: "Since", value: (member) => when(member.since) },
      ],
      rows: page.members,
    }));
    return page.nextPageToken;
  });
  fill(main, h("p", {}, h("a", { href: "#/groups" }, "← Device groups")), h("h1", {}, `Group ${name}`), summary, listing, pager.element);
  await pager.first();
  // FCM's own look-up: a fresh, equally valid key every time, as FCM answers it.
  try {
    const answer = await get("/fcm/notification", { notification_key_name: name }, { headers: { project_id: project.senderId } });
    // The clipboard is there only in a secure context (HTTPS or localhost).
    fill(key, h("code", {}, answer.notification_key),
      navigator.clipboard
        ? h("button", { type: "button", class: "plain copy", onclick: () => navigator.clipboard.writeText(answer.notification_key).catch(() => {}) }, "Copy")
        : null);
  } catch (error) {
    fill(key, error.message);
  }
}
