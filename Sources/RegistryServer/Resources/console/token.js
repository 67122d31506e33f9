// One token: its state, topics and groups, what became of each message sent to it, and acting on
// it: subscribe it to a topic, take it out of one, unregister it.
import { call, del, get, part, post } from "./api.js";
import { count, debounce, facts, fill, h, Pager, problem, segment, table, when } from "./dom.js";
import { messageTable } from "./messages.js";

/** A line that says what an action did (or why it did not), announced to screen readers. */
export function outcome() {
  const element = h("div", { class: "outcome", role: "status", "aria-live": "polite" });
  return {
    element,
    done: (text, ...more) => fill(element, h("p", { class: "done" }, text), ...more),
    failed: (error, ...more) => fill(element, problem(error), ...more),
    clear: () => fill(element),
  };
}

export async function tokenView(main, { signal }, token) {
  const input = h("input", { id: "token-input", type: "search", value: token || "", autocomplete: "off", spellcheck: "false" });
  const form = h("form", { class: "row", onsubmit: (event) => {
      event.preventDefault();
      const value = input.value.trim();
      if (value) location.hash = `#/tokens/${segment(value)}`;
    } },
    h("div", { class: "grow" }, h("label", { for: "token-input" }, "Registration token"), input),
    h("button", { type: "submit" }, "Look up"));
  const body = h("div");
  fill(main, h("h1", {}, token ? "Token" : "Tokens"), form, body);
  if (!token) return browse(body, signal);
  const said = outcome();
  const show = async () => {
    let info;
    try {
      info = await get(`/api/tokens/${part(token)}`);
    } catch (error) {
      if (error.status !== 404) throw error;
      fill(body, h("p", { class: "error-box", role: "alert" }, "This project does not know that token: no group, topic or send has named it."));
      return;
    }
    if (signal.aborted) return;
    const registered = info.state === "registered";
    const messages = h("div");
    const pager = new Pager(async (pageToken, current) => {
      const page = await get(`/api/tokens/${part(token)}/messages`, { pageSize: 20, pageToken });
      if (signal.aborted || !current()) return undefined;
      fill(messages, messageTable(page.messages, {
        caption: "Messages sent to the token, newest first, and what became of each on it",
        empty: "No message has reached this token yet.",
        token: true,
      }));
      return page.nextPageToken;
    });
    const topicField = h("input", { id: "subscribe-topic", type: "text", autocomplete: "off", spellcheck: "false", required: true, pattern: "[a-zA-Z0-9\\-_.~%]{1,900}" });
    const subscribe = h("form", { class: "row", "data-needs": "subscribe", onsubmit: async (event) => {
        event.preventDefault();
        const topic = topicField.value.trim();
        try {
          await post(`/iid/v1/${part(token)}/rel/topics/${part(topic)}`);
          said.done(`Subscribed the token to ${topic}.`);
          await show();
        } catch (error) { said.failed(error); }
      } },
      h("div", { class: "grow" }, h("label", { for: "subscribe-topic" }, "Subscribe to topic"), topicField),
      h("button", { type: "submit", disabled: !registered }, "Subscribe"));
    const unsubscribe = async (topic) => {
      try {
        const answer = await post("/iid/v1:batchRemove", { to: `/topics/${topic}`, registration_tokens: [token] });
        const error = answer.results && answer.results[0] && answer.results[0].error;
        if (error) throw new Error(`Not unsubscribed: ${error}`);
        said.done(`Unsubscribed the token from ${topic}.`);
        await show();
      } catch (error) { said.failed(error); }
    };
    const unregister = async () => {
      if (!confirm(`Unregister this token? It leaves its ${info.topics.length} topics and ${info.groups.length} groups at once, and they are not given back if it is registered again.`)) return;
      try {
        await del(`/api/tokens/${part(token)}`);
        said.done("Unregistered the token: it left every topic and group, and later sends skip it.");
        await show();
      } catch (error) { said.failed(error); }
    };
    const register = async () => {
      try {
        await call("PUT", `/api/tokens/${part(token)}`);
        said.done("Registered the token again.");
        await show();
      } catch (error) { said.failed(error); }
    };
    fill(body,
      h("section", { class: "card" },
        h("p", { class: "token" }, h("code", {}, info.token)),
        facts([
          ["State", h("span", { class: `badge ${registered ? "delivered" : "failed"}`, id: "token-state" }, info.state)],
          ["Registered", when(info.createdAt)],
          ["Changed", when(info.updatedAt)],
          ...device(info),
        ]),
        h("div", { class: "actions" },
          h("a", { class: "button plain", "data-needs": "send", href: `#/compose/token/${segment(token)}` }, "Send to this token"),
          registered
            ? h("button", { type: "button", class: "danger", id: "unregister", "data-needs": "admin", onclick: unregister }, "Unregister…")
            : h("button", { type: "button", class: "plain", id: "register", "data-needs": "subscribe", onclick: register }, "Register again"))),
      said.element,
      deviceForm(token, info, said, show),
      h("div", { class: "grid" },
        h("section", {}, h("h2", {}, `Topics (${count(info.topics.length)})`), table({
          columns: [
            { label: "Topic", value: (topic) => h("a", { href: `#/topics/${segment(topic.name)}` }, topic.name) },
            { label: "Since", value: (topic) => when(topic.since) },
            { label: "Action", value: (topic) => h("button", { type: "button", class: "plain small", "data-needs": "subscribe", "aria-label": `Unsubscribe from ${topic.name}`, dataset: { key: `unsubscribe-${topic.name}` }, onclick: () => unsubscribe(topic.name) }, "Unsubscribe") },
          ],
          rows: info.topics,
          empty: "Subscribed to no topic.",
        }), subscribe),
        h("section", {}, h("h2", {}, `Groups (${count(info.groups.length)})`), table({
          columns: [
            { label: "Group", value: (group) => h("a", { href: `#/groups/${segment(group.name)}` }, group.name) },
            { label: "Since", value: (group) => when(group.since) },
          ],
          rows: info.groups,
          empty: "In no device group.",
        }))),
      h("h2", {}, "Messages"),
      messages,
      pager.element);
    await pager.first();
  };
  await show();
}

/** The search typed last, kept while the tab lives. */
let browsed = "";

/** Every token the project knows, by value, searched by prefix as the operator types. */
async function browse(body, signal) {
  const listing = h("div");
  const status = h("div", { role: "status", "aria-live": "polite" });
  const search = h("input", { id: "token-prefix", type: "search", value: browsed, autocomplete: "off", spellcheck: "false" });
  const pager = new Pager(async (pageToken, current) => {
    const page = await get("/api/tokens", { prefix: browsed, pageSize: 50, pageToken });
    if (signal.aborted || !current()) return undefined;
    fill(listing, table({
      caption: browsed ? `Tokens that start with “${browsed}”, by value` : "Every token, by value",
      columns: [
        { label: "Token", className: "token", value: (item) => h("a", { href: `#/tokens/${segment(item.token)}` }, item.token) },
        { label: "State", value: (item) => h("span", { class: `badge ${item.state === "registered" ? "delivered" : "failed"}` }, item.state) },
        { label: "Since", value: (item) => when(item.createdAt) },
        ...attributes.map(({ name, label }) => ({ label, value: (item) => item[name] ?? "" })),
        { label: "Last seen", value: (item) => item.lastSeenAt ? [when(item.lastSeenAt), " ", freshness(item)] : "" },
      ],
      rows: page.tokens,
      empty: browsed ? "No token starts with that. Clear the search to see every token."
        : "No token yet. A token is known from its first subscription, group or send.",
    }));
    return page.nextPageToken;
  });
  search.addEventListener("input", debounce(() => { browsed = search.value.trim(); pager.first().catch((error) => fill(status, problem(error))); }, 200, signal));
  fill(body,
    h("div", { class: "row" }, h("div", { class: "grow" }, h("label", { for: "token-prefix" }, "Browse: token starts with"), search)),
    status, listing, pager.element);
  await pager.first();
}

/** What a token may say of its device (`PUT /api/tokens/{token}`), in the order shown. */
const attributes = [
  { name: "platform", label: "Platform", id: "token-platform" },
  { name: "locale", label: "Locale", id: "token-locale", hint: "fr-CA" },
  { name: "timeZone", label: "Time zone", id: "token-time-zone", hint: "Europe/Paris" },
  { name: "appVersion", label: "App version", id: "token-app-version", hint: "5.12.0" },
];

/** Fresh while the app checked in within 30 days (the server's `fresh`), else stale. */
function freshness(info) {
  return h("span", { class: `badge ${info.fresh ? "delivered" : "pending"}`, dataset: { fresh: String(info.fresh) } },
    info.fresh ? "fresh" : "stale");
}

/** The facts a token says of its device; what it never said is left out. */
function device(info) {
  const known = attributes.filter(({ name }) => info[name] !== undefined && info[name] !== null)
    .map(({ name, label, id }) => [label, h("span", { id: `${id}-shown` }, info[name])]);
  if (!info.lastSeenAt) return known;
  return [...known, ["Last seen", h("span", { id: "token-last-seen" }, when(info.lastSeenAt), " ", freshness(info))]];
}

/**
 * Changing what the token says of its device: only the fields changed are sent, an emptied one as
 * null (which clears it), and the server's refusal of a value is shown by its field. The call
 * carries the last-seen time shown, since an operator's edit is no sign that the app checked in;
 * an unregistered token is not edited, since the call would register it again.
 */
function deviceForm(token, info, said, show) {
  const registered = info.state === "registered";
  const fields = attributes.map((attribute) => {
    const error = h("p", { class: "field-error", id: `${attribute.id}-error`, role: "alert" });
    const control = attribute.name === "platform"
      ? h("select", { id: attribute.id, "aria-describedby": error.id },
          ["", "android", "ios", "web"].map((value) => h("option", { value, selected: (info.platform ?? "") === value }, value || "Unknown")))
      : h("input", { id: attribute.id, type: "text", value: info[attribute.name] ?? "", placeholder: attribute.hint,
          autocomplete: "off", spellcheck: "false", "aria-describedby": error.id });
    return { ...attribute, control, error };
  });
  const save = async (event) => {
    event.preventDefault();
    const body = {};
    for (const field of fields) {
      field.control.removeAttribute("aria-invalid");
      fill(field.error);
      const value = field.control.value.trim();
      if (value !== (info[field.name] ?? "")) body[field.name] = value === "" ? null : value;
    }
    const changed = fields.filter(({ name }) => name in body).map(({ label }) => label.toLowerCase());
    if (!changed.length) return said.done("Nothing changed: the device details are as shown.");
    if (info.lastSeenAt) body.lastSeenAt = info.lastSeenAt;
    try {
      await call("PUT", `/api/tokens/${part(token)}`, { body });
      said.done(`Saved the token's ${changed.join(", ")}.`);
      await show();
    } catch (error) {
      const message = error.status === 400 ? error.message : "";
      const field = fields.find(({ name }) => message.startsWith(name));
      if (!field) return said.failed(error);
      said.clear();
      field.control.setAttribute("aria-invalid", "true");
      fill(field.error, message);
      field.control.focus();
    }
  };
  return h("section", { class: "device", "data-needs": "subscribe" },
    h("h2", {}, "Device"),
    registered ? null : h("p", { class: "muted" }, "Register the token again to change what it says of its device."),
    h("form", { class: "row", id: "device-form", onsubmit: save },
      fields.map(({ id, label, control, error }) => h("div", {}, h("label", { for: id }, label), control, error)),
      h("button", { type: "submit", disabled: !registered }, "Save device details")));
}
