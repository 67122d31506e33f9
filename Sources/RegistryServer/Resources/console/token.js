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
        ]),
        h("div", { class: "actions" },
          h("a", { class: "button plain", "data-needs": "send", href: `#/compose/token/${segment(token)}` }, "Send to this token"),
          registered
            ? h("button", { type: "button", class: "danger", id: "unregister", "data-needs": "admin", onclick: unregister }, "Unregister…")
            : h("button", { type: "button", class: "plain", id: "register", "data-needs": "subscribe", onclick: register }, "Register again"))),
      said.element,
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
