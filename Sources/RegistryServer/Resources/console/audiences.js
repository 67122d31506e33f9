// Topics and device groups: lists with counts (searched by name prefix, paged through any number),
// and each topic's subscribers and group's members.
import { get, part, post } from "./api.js";
import { count, debounce, facts, fill, h, live, Pager, problem, refill, segment, table, when } from "./dom.js";
import { outcome } from "./token.js";

/** How often the topic list and a topic's count ask again while shown. */
const topicsEvery = 10_000;

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
    refill(listing, table({
      caption: prefix ? `Topics whose names start with “${prefix}”` : "All topics",
      columns: [
        { label: "Name", sort: "name", value: (topic) => h("a", { href: `#/topics/${segment(topic.name)}` }, topic.name) },
        { label: "Subscribers", sort: "subscriberCount", numeric: true, value: (topic) => count(topic.subscriberCount) },
        { label: "Created", value: (topic) => when(topic.createdAt) },
      ],
      rows: page.topics,
      sorted: { key: orderBy, descending: orderBy === "subscriberCount" },
      onSort: (key) => { state.topics.orderBy = key; reload(); },
      empty: prefix ? "No topic name starts with that. Clear the search to see every topic."
        : "No topic has a subscriber yet. Subscribe tokens with batchAdd, or open a topic by name below and paste its tokens.",
    }));
    return page.nextPageToken;
  });
  const reload = () => pager.first().catch((error) => fill(status, problem(error)));
  const opening = h("input", { id: "open-topic", type: "text", autocomplete: "off", spellcheck: "false", required: true });
  fill(main,
    h("h1", {}, "Topics"),
    h("div", { class: "row" },
      prefixSearch("topic-prefix", "Name starts with", state.topics.prefix, (prefix) => { state.topics.prefix = prefix; reload(); }, signal),
      h("form", { class: "row inline", onsubmit: (event) => { event.preventDefault(); if (opening.value.trim()) location.hash = `#/topics/${segment(opening.value.trim())}`; } },
        h("div", {}, h("label", { for: "open-topic" }, "Open a topic by name"), opening),
        h("button", { type: "submit", class: "plain" }, "Open"))),
    status, listing, pager.element);
  await pager.first();
  live(signal, () => pager.refresh(), topicsEvery);
}

/**
 * A topic's summary, or `null` when nobody is subscribed to it: from the listing ranked on the
 * server's in-memory index (no row is counted, and a name nobody uses is no error), then, when
 * more than a page of larger topics share its name as a prefix, from the topic itself.
 */
export async function topicSummary(name) {
  const page = await get("/api/topics", { prefix: name, orderBy: "subscriberCount", pageSize: 200 });
  const found = page.topics.find((topic) => topic.name === name);
  if (found || !page.nextPageToken) return found || null;
  return get(`/api/topics/${part(name)}`, { pageSize: 1 });
}

/** A group's summary from the listing by prefix, as for topics. */
export async function groupSummary(name) {
  const page = await get("/api/groups", { prefix: name, pageSize: 1 });
  return page.groups.find((group) => group.name === name) || null;
}

/**
 * FCM's form of a registration token (and of a Firebase installation id, which is sent where a
 * token is): the server's alphabet and bound (Registry's `RegistrationToken`), and no shorter
 * than 16 characters, where FCM's shortest, an installation id, has 22.
 */
const tokenForm = /^[A-Za-z0-9_:.-]+$/;
const shortestToken = 16, longestToken = 4096;

/** Why `entry` is not a registration token, or `null` when it is one in FCM's form. */
function notAToken(entry) {
  if (/\s/.test(entry)) return "holds a space";
  if (!tokenForm.test(entry)) return "holds characters no token has";
  if (entry.length < shortestToken) return "too short";
  if (entry.length > longestToken) return "too long";
  return null;
}

/**
 * A pasted list of tokens: one an entry, entries split on line breaks and commas (never on
 * spaces: "not a token" is one refused entry, not three tokens), trimmed, each once. `refused`
 * are the entries not in FCM's form, with why; only `tokens` are sent.
 */
function pasted(text) {
  const entries = [...new Set(text.split(/[\r\n,]+/).map((entry) => entry.trim()).filter(Boolean))];
  const tokens = [], refused = [];
  for (const entry of entries) {
    const why = notAToken(entry);
    if (why) refused.push({ entry, why }); else tokens.push(entry);
  }
  return { tokens, refused };
}

/** "1 entry refused as no registration token", for a summary. */
function refusedCount(refused) {
  return `${count(refused.length)} ${refused.length === 1 ? "entry" : "entries"} refused as no registration token`;
}

/** The refused entries, each with why, the first 20 of them: what the operator fixes and pastes again. */
function refusedList(refused) {
  if (!refused.length) return null;
  const shown = refused.slice(0, 20);
  return h("div", { class: "refused", dataset: { refused: String(refused.length) } },
    h("p", {}, `Not sent: ${count(refused.length)} ${refused.length === 1 ? "entry is" : "entries are"} not in FCM's form (letters, digits, “-”, “_”, “:” and “.”, 16 to 4,096 characters):`),
    h("ul", {}, shown.map(({ entry, why }) =>
      h("li", {}, h("code", {}, entry.length > 80 ? `${entry.slice(0, 79)}…` : entry), ` — ${why}`))),
    refused.length > shown.length ? h("p", { class: "muted" }, `and ${count(refused.length - shown.length)} more.`) : null);
}

/**
 * Subscribes or unsubscribes pasted tokens through the IID batch API, 1,000 a call as FCM allows,
 * and says how many of each outcome.
 */
async function batch(operation, topic, tokens) {
  const errors = new Map();
  let done = 0;
  for (let start = 0; start < tokens.length; start += 1000) {
    const answer = await post(`/iid/v1:${operation}`, { to: `/topics/${topic}`, registration_tokens: tokens.slice(start, start + 1000) });
    for (const result of answer.results || []) {
      if (result.error) errors.set(result.error, (errors.get(result.error) || 0) + 1);
      else done += 1;
    }
  }
  return { done, errors };
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
    refill(heading, facts([["Subscribers", h("span", { id: "topic-count", dataset: { count: String(page.subscriberCount) } }, count(page.subscriberCount))], ["Created", when(page.createdAt)]]));
    refill(listing, table({
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
  const said = outcome();
  const tokens = h("textarea", { id: "topic-tokens", rows: 3, spellcheck: "false", autocomplete: "off", "aria-describedby": "topic-tokens-help" });
  const act = async (operation) => {
    const { tokens: list, refused } = pasted(tokens.value);
    if (!list.length && !refused.length) { said.failed(new Error("Paste one or more registration tokens first.")); return; }
    if (!list.length) { said.failed(new Error(`Nothing sent: ${refusedCount(refused)}.`), refusedList(refused)); return; }
    if (operation === "batchRemove" && list.length > 1 && !confirm(`Unsubscribe ${count(list.length)} tokens from ${name}?`)) return;
    try {
      const { done, errors } = await batch(operation, name, list);
      const verb = operation === "batchAdd" ? "Subscribed" : "Unsubscribed";
      const answered = [...errors].map(([error, times]) => `${count(times)} refused with ${error}`);
      const notes = [...answered, ...(refused.length ? [refusedCount(refused)] : [])].join("; ");
      said.done(`${verb} ${count(done)} of ${count(list.length)} tokens ${operation === "batchAdd" ? "to" : "from"} ${name}${notes ? `; ${notes}` : ""}.`, refusedList(refused));
      // What was refused stays in the field, to be fixed and sent again.
      if (done) tokens.value = refused.map(({ entry }) => entry).join("\n");
      if (listing.contains(empty)) await pager.first(); else await pager.refresh();
    } catch (error) { said.failed(error); }
  };
  const manage = h("details", { class: "card manage" },
    h("summary", {}, "Subscribe or unsubscribe tokens"),
    h("label", { for: "topic-tokens" }, "Registration tokens"),
    tokens,
    h("p", { id: "topic-tokens-help", class: "muted" }, "One or more, one a line or separated by commas; an entry that is not a registration token is refused and shown, the rest sent 1,000 a call through the Instance ID batch API."),
    h("div", { class: "actions" },
      h("button", { type: "button", id: "subscribe", "data-needs": "subscribe", onclick: () => act("batchAdd") }, "Subscribe"),
      h("button", { type: "button", class: "plain", id: "unsubscribe", "data-needs": "subscribe", onclick: () => act("batchRemove") }, "Unsubscribe")),
    said.element);
  const empty = h("p", { class: "muted empty" }, `No token is subscribed to ${name} yet: paste tokens above and Subscribe, and the topic begins.`);
  fill(main,
    h("p", { class: "back" }, h("a", { href: "#/topics" }, "← Topics")),
    h("h1", {}, `Topic ${name}`),
    heading,
    h("div", { class: "actions" },
      h("a", { class: "button plain", "data-needs": "send", href: `#/compose/topic/${segment(name)}` }, "Send to this topic"),
      h("a", { class: "button plain", href: `#/conditions`, onclick: () => { sessionStorage.setItem("fcm-registry.condition", `'${name}' in topics`); } }, "Try it in a condition")),
    manage,
    h("div", { class: "row" }, h("div", {}, h("label", { for: "page-size" }, "Page size"), size)),
    listing, pager.element, timing);
  // A topic nobody is subscribed to is no error: it says how to start one.
  const known = await topicSummary(name);
  if (signal.aborted) return;
  if (!known) {
    fill(listing, empty);
    manage.open = true;
  } else {
    await pager.first();
  }
  // The count is live; the page being read holds still until the reader pages.
  live(signal, async () => {
    const now = listing.contains(empty) ? await topicSummary(name) : await get(`/api/topics/${part(name)}`, { pageSize: 1 });
    if (signal.aborted) return;
    if (now && listing.contains(empty)) { await pager.first(); return; }
    const counter = document.getElementById("topic-count");
    if (now && counter) { counter.dataset.count = String(now.subscriberCount); counter.textContent = count(now.subscriberCount); }
  }, topicsEvery);
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
      empty: state.groups.prefix ? "No group name starts with that. Clear the search to see every group." : "No device group yet. An app server creates one with POST /fcm/notification (operation create), or import Google's groups (docs/migrate-from-fcm.md).",
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
  const said = outcome();
  let notificationKey;
  let members = 0;
  /** FCM's own call, as an app server makes it: `POST /fcm/notification` with the group's key. */
  const change = (operation, tokens) => post("/fcm/notification",
    { operation, notification_key_name: name, notification_key: notificationKey, registration_ids: tokens },
    { headers: { project_id: project.senderId } });
  const remove = async (token) => {
    if (members === 1 && !confirm(`${token} is the group's last member: removing it deletes the group ${name}, and its notification keys stop working. Remove it?`)) return;
    try {
      await change("remove", [token]);
      said.done(members === 1 ? `Removed the last member: the group ${name} is deleted.` : "Removed the token from the group.");
      if (members === 1) { location.hash = "#/groups"; return; }
      await pager.refresh();
    } catch (error) { said.failed(error); }
  };
  const pager = new Pager(async (pageToken, current) => {
    const page = await get(`/api/groups/${part(name)}`, { pageSize: 100, pageToken });
    if (signal.aborted || !current()) return undefined;
    members = page.memberCount;
    refill(summary, facts([
      ["Members", h("span", { id: "group-count" }, count(page.memberCount))],
      ["Created", when(page.createdAt)],
      ["Notification key", key],
    ]));
    refill(listing, table({
      caption: `Members (${count(page.memberCount)})`,
      columns: [
        { label: "Token", className: "token", value: (member) => h("a", { href: `#/tokens/${segment(member.token)}` }, member.token) },
        { label: "Since", value: (member) => when(member.since) },
        { label: "Action", value: (member) => h("button", { type: "button", class: "plain small", "data-needs": "subscribe", "aria-label": `Remove ${member.token}`, dataset: { key: `remove-${member.token}` }, onclick: () => remove(member.token) }, "Remove") },
      ],
      rows: page.members,
    }));
    return page.nextPageToken;
  });
  const adding = h("textarea", { id: "group-tokens", rows: 2, spellcheck: "false", autocomplete: "off" });
  const add = h("form", { class: "card manage", "data-needs": "subscribe", onsubmit: async (event) => {
      event.preventDefault();
      const { tokens, refused } = pasted(adding.value);
      if (!tokens.length && !refused.length) { said.failed(new Error("Paste one or more registration tokens first.")); return; }
      if (!tokens.length) { said.failed(new Error(`Nothing sent: ${refusedCount(refused)}.`), refusedList(refused)); return; }
      try {
        await change("add", tokens);
        said.done(`Added ${count(tokens.length)} ${tokens.length === 1 ? "token" : "tokens"} to the group${refused.length ? `; ${refusedCount(refused)}` : ""}.`, refusedList(refused));
        // What was refused stays in the field, to be fixed and sent again.
        adding.value = refused.map(({ entry }) => entry).join("\n");
        await pager.refresh();
      } catch (error) { said.failed(error); }
    } },
    h("label", { for: "group-tokens" }, "Add members (registration tokens, one a line or separated by commas)"),
    adding,
    h("div", { class: "actions" }, h("button", { type: "submit", id: "add-members" }, "Add to group")));
  fill(main,
    h("p", { class: "back" }, h("a", { href: "#/groups" }, "← Device groups")),
    h("h1", {}, `Group ${name}`),
    summary,
    h("div", { class: "actions" }, h("a", { class: "button plain", "data-needs": "send", href: `#/compose/group/${segment(name)}` }, "Send to this group")),
    said.element,
    listing, pager.element, add);
  await pager.first();
  // FCM's own look-up: a fresh, equally valid key every time, as FCM answers it.
  try {
    const answer = await get("/fcm/notification", { notification_key_name: name }, { headers: { project_id: project.senderId } });
    notificationKey = answer.notification_key;
    // The clipboard is there only in a secure context (HTTPS or localhost).
    fill(key, h("code", {}, answer.notification_key),
      navigator.clipboard
        ? h("button", { type: "button", class: "plain copy", onclick: () => navigator.clipboard.writeText(answer.notification_key).catch(() => {}) }, "Copy")
        : null);
  } catch (error) {
    fill(key, error.message);
  }
}
