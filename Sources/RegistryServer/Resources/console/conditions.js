// The condition playground: as the operator types, the API's diagnostics (with their caret), then
// who the condition reaches: the count, each topic's subscribers, and the tokens page by page.
import { post } from "./api.js";
import { count, debounce, fill, h, Pager, problem, segment, table } from "./dom.js";

/** The dialects a condition is checked in, by the protocol that would send it. */
const dialects = [
  ["legacy", "Legacy HTTP (/fcm/send): && and ||, at most 2 operators"],
  ["v1", "HTTP v1: && || ! ( ), at most 5 topics"],
  ["xmpp", "XMPP: as legacy HTTP"],
  ["extended", "Native API: no FCM caps"],
];
const apiDialect = (choice) => (choice === "xmpp" ? "legacy" : choice);

/** What was typed last, kept while the tab lives. */
let remembered = { condition: "'news' in topics && !('sports' in topics)", dialect: "v1" };

export async function conditions(main, { signal }) {
  // A topic's screen hands over a condition to try.
  const handed = sessionStorage.getItem("fcm-registry.condition");
  if (handed) {
    sessionStorage.removeItem("fcm-registry.condition");
    remembered = { ...remembered, condition: handed };
  }
  const input = h("textarea", { id: "condition", rows: 3, spellcheck: "false", autocomplete: "off",
    "aria-describedby": "condition-diagnostic" });
  input.value = remembered.condition;
  const dialect = h("select", { id: "dialect" }, dialects.map(([value, label]) => h("option", { value }, label)));
  dialect.value = remembered.dialect;
  const diagnostic = h("div", { id: "condition-diagnostic", role: "status", "aria-live": "polite" });
  const reach = h("section", { id: "condition-reach", "aria-label": "Who the condition reaches" });
  let asked = 0;

  const check = async () => {
    const condition = input.value;
    const chosen = dialect.value;
    remembered = { condition, dialect: chosen };
    const mine = ++asked;
    if (!condition.trim()) {
      input.removeAttribute("aria-invalid");
      fill(diagnostic, h("p", { class: "muted" }, "Type a condition, such as 'news' in topics || 'weather' in topics."));
      fill(reach);
      return;
    }
    try {
      const report = await post("/api/conditions:check", { condition, dialect: apiDialect(chosen) });
      if (mine !== asked || signal.aborted) return;
      input.setAttribute("aria-invalid", report.valid ? "false" : "true");
      fill(diagnostic,
        report.diagnostics.map((item) => h("pre", { class: `diagnostic ${item.severity}`, dataset: { kind: item.kind, offset: String(item.offset) } }, item.rendered)),
        report.omittedWarnings ? h("p", { class: "muted" }, `and ${count(report.omittedWarnings)} more warnings`) : null,
        report.valid ? h("p", { class: "muted" }, `Canonical: ${report.canonical} · ${report.topicCount} topics, ${report.operatorCount} operators`) : null);
      if (!report.valid) { fill(reach); return; }
      await showReach(reach, condition, apiDialect(chosen), () => mine === asked && !signal.aborted);
    } catch (error) {
      if (mine === asked) fill(diagnostic, problem(error));
    }
  };
  const soon = debounce(check, 150, signal);
  input.addEventListener("input", soon);
  dialect.addEventListener("change", check);

  fill(main,
    h("h1", {}, "Conditions"),
    h("p", { class: "muted" }, "Checks a topic condition as FCM would, then resolves it against this registry: how many tokens it reaches and which."),
    h("div", { class: "card" },
      h("label", { for: "condition" }, "Condition"),
      input,
      h("div", { class: "row" }, h("div", {}, h("label", { for: "dialect" }, "Dialect"), dialect)),
      diagnostic),
    reach);
  await check();
}

/** The count, each topic's subscribers, and a pager over the tokens. */
async function showReach(reach, condition, dialect, stillAsked) {
  const tokens = h("div");
  const pager = new Pager(async (pageToken, current) => {
    const page = await post("/api/audiences:resolve", { condition, dialect, pageSize: 100, pageToken });
    if (!stillAsked() || !current()) return undefined;
    fill(tokens, tokenTable(page));
    return page.nextPageToken;
  });
  const first = await post("/api/audiences:resolve", { condition, dialect, pageSize: 100 });
  if (!stillAsked()) return;
  const terms = Object.entries(first.topicCounts || {}).sort(([a], [b]) => (a < b ? -1 : 1));
  fill(reach,
    h("div", { class: "card" },
      h("h2", {}, "Reaches"),
      h("div", { class: "split" },
        h("p", {}, h("strong", { id: "condition-count", dataset: { count: String(first.count) } }, count(first.count)), " tokens"),
        dialect === "v1" ? h("a", { class: "button plain", "data-needs": "send", href: `#/compose/condition/${segment(condition)}` }, "Send to this condition") : null),
      table({
        caption: "Subscribers of each topic the condition names",
        columns: [
          { label: "Topic", value: ([name]) => h("a", { href: `#/topics/${segment(name)}` }, name) },
          { label: "Subscribers", numeric: true, value: ([, subscribers]) => count(subscribers) },
        ],
        rows: terms,
      })),
    h("h2", {}, "Tokens"),
    tokens,
    pager.element);
  pager.next = first.nextPageToken;
  fill(tokens, tokenTable(first));
  pager.render();
}

/** One page of an audience's tokens, each a link to the token's screen. */
function tokenTable(page) {
  return table({
    caption: `${count(page.count)} tokens in all, in registration order`,
    columns: [{ label: "Token", className: "token", value: (token) => h("a", { href: `#/tokens/${segment(token)}` }, token) }],
    rows: page.tokens,
    empty: "The condition reaches no token.",
  });
}
