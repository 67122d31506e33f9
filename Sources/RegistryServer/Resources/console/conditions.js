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
let remembered = { condition: "'news' in topics && !('sports' in topics)", dialect: "v1", narrowed: {} };

/** How recently a token must have been seen, as `where.seenWithin` takes it. */
const seenChoices = [["", "Any time"], ["604800s", "Within 7 days"], ["2592000s", "Within 30 days (fresh)"],
  ["7776000s", "Within 90 days"]];

/**
 * "Narrow by what tokens say": the `where` the resolve calls send. Lists are typed comma-separated;
 * an empty field narrows nothing. The API checks every value and words any refusal.
 */
function narrowing(changed) {
  const platforms = ["android", "ios", "web"].map((name) => h("input", { type: "checkbox", id: `where-platform-${name}`, value: name,
    checked: (remembered.narrowed.platform || []).includes(name) }));
  const text = (id, label, value, placeholder) => {
    const input = h("input", { id, type: "text", value: value || "", placeholder, autocomplete: "off", spellcheck: "false" });
    return [input, h("div", {}, h("label", { for: id }, label), input)];
  };
  const given = remembered.narrowed;
  const [locale, localeField] = text("where-locale", "Locales", (given.locale || []).join(", "), "fr, en-GB");
  const [zone, zoneField] = text("where-time-zone", "Time zones", (given.timeZone || []).join(", "), "Europe/Paris");
  const [low, lowField] = text("where-version-min", "App version from", given.appVersion?.min, "5.0.0");
  const [high, highField] = text("where-version-max", "to", given.appVersion?.max, "5.99");
  const seen = h("select", { id: "where-seen" }, seenChoices.map(([value, label]) => h("option", { value }, label)));
  seen.value = given.seenWithin || "";
  const list = (input) => input.value.split(",").map((item) => item.trim()).filter(Boolean);
  const read = () => {
    const where = {};
    const chosen = platforms.filter((box) => box.checked).map((box) => box.value);
    if (chosen.length) where.platform = chosen;
    if (list(locale).length) where.locale = list(locale);
    if (list(zone).length) where.timeZone = list(zone);
    if (low.value.trim() || high.value.trim()) {
      where.appVersion = {};
      if (low.value.trim()) where.appVersion.min = low.value.trim();
      if (high.value.trim()) where.appVersion.max = high.value.trim();
    }
    if (seen.value) where.seenWithin = seen.value;
    return where;
  };
  const element = h("fieldset", { class: "events", id: "where" },
    h("legend", {}, "Narrow by what tokens say"),
    h("div", { class: "row" },
      platforms.map((box) => h("label", { class: "check", for: box.id }, box, h("span", {}, box.value))),
      localeField, zoneField, lowField, highField,
      h("div", {}, h("label", { for: "where-seen" }, "Last seen"), seen)),
    h("p", { class: "muted" }, "Within a field the values are alternatives; the fields combine. A token that says nothing of a field never matches it."));
  element.addEventListener("input", changed);
  element.addEventListener("change", changed);
  return { element, read };
}

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
  let soon = () => {};
  const narrowed = narrowing(() => soon());

  const check = async () => {
    const condition = input.value;
    const chosen = dialect.value;
    const where = narrowed.read();
    remembered = { condition, dialect: chosen, narrowed: where };
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
      await showReach(reach, { condition, dialect: apiDialect(chosen), where }, () => mine === asked && !signal.aborted);
    } catch (error) {
      if (mine === asked) fill(diagnostic, problem(error));
    }
  };
  soon = debounce(check, 150, signal);
  input.addEventListener("input", soon);
  dialect.addEventListener("change", check);

  fill(main,
    h("h1", {}, "Conditions"),
    h("p", { class: "muted" }, "Checks a topic condition as FCM would, then resolves it against this registry: how many tokens it reaches and which."),
    h("div", { class: "card" },
      h("label", { for: "condition" }, "Condition"),
      input,
      h("div", { class: "row" }, h("div", {}, h("label", { for: "dialect" }, "Dialect"), dialect)),
      diagnostic,
      narrowed.element),
    reach);
  await check();
}

/** The count, each topic's subscribers, and a pager over the tokens, all within `where`. */
async function showReach(reach, { condition, dialect, where }, stillAsked) {
  const tokens = h("div");
  const asked = Object.keys(where).length ? { condition, dialect, where } : { condition, dialect };
  const pager = new Pager(async (pageToken, current) => {
    const page = await post("/api/audiences:resolve", { ...asked, pageSize: 100, pageToken });
    if (!stillAsked() || !current()) return undefined;
    fill(tokens, tokenTable(page));
    return page.nextPageToken;
  });
  let first;
  try {
    first = await post("/api/audiences:resolve", { ...asked, pageSize: 100 });
  } catch (error) {
    // A refused where is the operator's to fix: said where the reach would be.
    if (stillAsked()) fill(reach, h("div", { class: "card", id: "where-refused" }, problem(error)));
    return;
  }
  if (!stillAsked()) return;
  const terms = Object.entries(first.topicCounts || {}).sort(([a], [b]) => (a < b ? -1 : 1));
  fill(reach,
    h("div", { class: "card" },
      h("h2", {}, "Reaches"),
      h("div", { class: "split" },
        h("p", {}, h("strong", { id: "condition-count", dataset: { count: String(first.count) } }, count(first.count)), " tokens"),
        dialect === "v1" && asked.where === undefined
          ? h("a", { class: "button plain", "data-needs": "send", href: `#/compose/condition/${segment(condition)}` }, "Send to this condition") : null),
      table({
        caption: asked.where ? "Subscribers of each topic the condition names, narrowed" : "Subscribers of each topic the condition names",
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
