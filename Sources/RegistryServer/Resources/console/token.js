// One token: its state, topics and groups, and the logged messages that reached it.
import { get, part } from "./api.js";
import { count, facts, fill, h, Pager, segment, table, when } from "./dom.js";

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
  fill(main, h("h1", {}, "Tokens"), form, body);
  if (!token) {
    fill(body, h("p", { class: "muted" }, "Paste a registration token, or follow one from a topic, a group or a message."));
    return;
  }
  let info;
  try {
    info = await get(`/api/tokens/${part(token)}`);
  } catch (error) {
    if (error.status !== 404) throw error;
    fill(body, h("p", { class: "error-box", role: "alert" }, "This project does not know that token: no group, topic or send has named it."));
    return;
  }
  if (signal.aborted) return;
  const messages = h("div");
  const pager = new Pager(async (pageToken, current) => {
    const page = await get(`/api/tokens/${part(token)}/messages`, { pageSize: 20, pageToken });
    if (signal.aborted || !current()) return undefined;
    fill(messages, table({
      caption: "Logged messages that reached the token, newest first",
      columns: [
        { label: "Received", value: (message) => h("a", { href: `#/messages/${segment(message.id)}` }, when(message.receivedAt)) },
        { label: "Protocol", value: (message) => message.protocol },
        { label: "Target", className: "token", value: (message) => message.target },
      ],
      rows: page.messages,
      empty: "No logged message reached this token.",
    }));
    return page.nextPageToken;
  });
  fill(body,
    h("section", { class: "card" },
      h("p", { class: "token" }, h("code", {}, info.token)),
      facts([
        ["State", h("span", { class: `badge ${info.state === "registered" ? "delivered" : "failed"}`, id: "token-state" }, info.state)],
        ["Registered", when(info.createdAt)],
        ["Changed", when(info.updatedAt)],
      ])),
    h("div", { class: "grid" },
      h("section", {}, h("h2", {}, `Topics (${count(info.topics.length)})`), table({
        columns: [
          { label: "Topic", value: (topic) => h("a", { href: `#/topics/${segment(topic.name)}` }, topic.name) },
          { label: "Since", value: (topic) => when(topic.since) },
        ],
        rows: info.topics,
        empty: "Subscribed to no topic.",
      })),
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
}
