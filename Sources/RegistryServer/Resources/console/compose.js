// The composer: a message to a token, a topic, a condition or a device group, with its audience
// in view before it goes, a dry run, and the sent message's screen after. It sends through the
// documented API as any app server would: HTTP v1 `messages:send` (with `validate_only` for the
// dry run), and for a device group the legacy `/fcm/send` with the group's notification key (v1
// has no device-group target). Every call carries `X-Registry-Client: console`, which the
// server's access log records.
import { get, part, post } from "./api.js";
import { count, debounce, fill, h, problem } from "./dom.js";
import { groupSummary, topicSummary } from "./audiences.js";

/** What a target can be, and what its field is called. */
const kinds = [
  ["topic", "Topic"],
  ["condition", "Condition"],
  ["token", "Token"],
  ["group", "Device group"],
];

/** What was typed, kept while the tab lives, so leaving and coming back keeps the draft. */
let draft = { kind: "topic", target: "", title: "", body: "", data: [["", ""]], priority: "high", ttl: "", collapseKey: "" };

export async function compose(main, { project, signal }, kind, target) {
  if (kind && kinds.some(([name]) => name === kind)) draft = { ...draft, kind, target: target || "" };
  const said = h("div", { id: "compose-outcome", role: "status", "aria-live": "polite" });
  const audience = h("div", { id: "audience", "aria-live": "polite" });
  const kindSelect = h("select", { id: "target-kind" }, kinds.map(([value, label]) => h("option", { value }, label)));
  kindSelect.value = draft.kind;
  // Not `required`: the field is hidden for a condition, and a hidden required field stops the
  // form without a word. The console checks the target itself, as it checks the rest.
  const targetInput = h("input", { id: "target", type: "text", autocomplete: "off", spellcheck: "false" });
  const conditionInput = h("textarea", { id: "target-condition", rows: 2, spellcheck: "false", autocomplete: "off", "aria-describedby": "audience" });
  const targetLabel = h("label", { for: "target" });
  const conditionLabel = h("label", { for: "target-condition" }, "Condition (HTTP v1 rules: at most 5 topics, ! allowed)");
  const targetField = h("div", { class: "grow" }, targetLabel, targetInput);
  const conditionField = h("div", { class: "grow" }, conditionLabel, conditionInput);
  const titleInput = h("input", { id: "title", type: "text", autocomplete: "off", value: draft.title });
  const bodyInput = h("textarea", { id: "body", rows: 2, value: draft.body });
  bodyInput.value = draft.body;
  const priority = h("select", { id: "priority" }, h("option", { value: "high" }, "High"), h("option", { value: "normal" }, "Normal"));
  priority.value = draft.priority;
  const ttl = h("input", { id: "ttl", type: "number", min: 0, max: 2419200, step: 1, inputmode: "numeric", placeholder: "4 weeks", value: draft.ttl });
  const collapseKey = h("input", { id: "collapse-key", type: "text", autocomplete: "off", value: draft.collapseKey });
  const pairs = h("div", { class: "pairs" });
  const sendButton = h("button", { type: "submit", id: "send", "data-needs": "send" }, "Send");
  const dryButton = h("button", { type: "button", class: "plain", id: "dry-run", "data-needs": "send" }, "Dry run");

  /** The data pairs as rows of two labelled fields. */
  const drawPairs = () => fill(pairs, draft.data.map(([name, value], index) => h("div", { class: "pair" },
    h("div", {}, h("label", { for: `data-key-${index}` }, `Data key ${index + 1}`),
      h("input", { id: `data-key-${index}`, type: "text", autocomplete: "off", spellcheck: "false", value: name, oninput: (event) => { draft.data[index][0] = event.target.value; } })),
    h("div", {}, h("label", { for: `data-value-${index}` }, "Value"),
      h("input", { id: `data-value-${index}`, type: "text", autocomplete: "off", value, oninput: (event) => { draft.data[index][1] = event.target.value; } })),
    h("button", { type: "button", class: "plain small", "aria-label": `Remove data pair ${index + 1}`, onclick: () => { draft.data.splice(index, 1); if (!draft.data.length) draft.data.push(["", ""]); drawPairs(); } }, "Remove"))),
    h("button", { type: "button", class: "plain small", id: "add-pair", onclick: () => { draft.data.push(["", ""]); drawPairs(); pairs.querySelector(`#data-key-${draft.data.length - 1}`).focus(); } }, "Add a data pair"));

  const showKind = () => {
    const chosen = kindSelect.value;
    draft.kind = chosen;
    const isCondition = chosen === "condition";
    targetField.hidden = isCondition;
    conditionField.hidden = !isCondition;
    targetLabel.textContent = { topic: "Topic name", token: "Registration token", group: "Group name (notification_key_name)" }[chosen] || "";
    if (isCondition) conditionInput.value = draft.target; else targetInput.value = draft.target;
  };

  // The audience, as the target is typed: a condition's diagnostics and count as the playground
  // gives them, a topic's subscribers, a group's members, whether a token is registered.
  let asked = 0;
  const reach = async () => {
    const mine = ++asked;
    const target = draft.target.trim();
    const shown = (...content) => { if (mine === asked && !signal.aborted) fill(audience, ...content); };
    if (!target) return shown(h("p", { class: "muted" }, "Name a target to see whom the message reaches."));
    try {
      if (draft.kind === "condition") {
        const report = await post("/api/conditions:check", { condition: target, dialect: "v1" });
        if (!report.valid) {
          conditionInput.setAttribute("aria-invalid", "true");
          return shown(report.diagnostics.map((item) => h("pre", { class: `diagnostic ${item.severity}` }, item.rendered)));
        }
        conditionInput.setAttribute("aria-invalid", "false");
        const resolved = await post("/api/audiences:resolve", { condition: target, dialect: "v1", countOnly: true });
        return shown(reaches(resolved.count), report.diagnostics.map((item) => h("pre", { class: `diagnostic ${item.severity}` }, item.rendered)));
      }
      // Looked up through the listings by prefix, which answer a name nobody uses yet without an error.
      if (draft.kind === "topic") {
        const topic = await topicSummary(target);
        return shown(reaches(topic ? topic.subscriberCount : 0));
      }
      if (draft.kind === "group") {
        const group = await groupSummary(target);
        return shown(group ? reaches(group.memberCount) : h("p", { class: "error-box" }, "No device group has that name."));
      }
      const token = (await get("/api/tokens", { prefix: target, pageSize: 1 })).tokens.find((item) => item.token === target);
      if (!token) return shown(h("p", { class: "muted" }, "This project does not know the token yet: the send names it, and FCM judges it."));
      return shown(token.state === "registered" ? reaches(1) : h("p", { class: "error-box" }, "This token is unregistered: FCM would answer UNREGISTERED."));
    } catch (error) {
      return shown(problem(error));
    }
  };
  const soon = debounce(reach, 200, signal);
  targetInput.addEventListener("input", () => { draft.target = targetInput.value; soon(); });
  conditionInput.addEventListener("input", () => { draft.target = conditionInput.value; soon(); });
  kindSelect.addEventListener("change", () => { draft.target = ""; showKind(); reach(); });
  titleInput.addEventListener("input", () => { draft.title = titleInput.value; });
  bodyInput.addEventListener("input", () => { draft.body = bodyInput.value; });
  priority.addEventListener("change", () => { draft.priority = priority.value; });
  ttl.addEventListener("input", () => { draft.ttl = ttl.value; });
  collapseKey.addEventListener("input", () => { draft.collapseKey = collapseKey.value; });

  const send = async (dryRun) => {
    const target = draft.target.trim();
    const targetControl = draft.kind === "condition" ? conditionInput : targetInput;
    if (!target) { fill(said, problem(new Error("Name a target first."))); targetControl.focus(); return; }
    if (draft.ttl !== "" && !(Number.isInteger(Number(draft.ttl)) && Number(draft.ttl) >= 0 && Number(draft.ttl) <= 2419200)) {
      fill(said, problem(new Error("Time to live is a whole number of seconds, from 0 to 2,419,200 (4 weeks).")));
      ttl.focus();
      return;
    }
    sendButton.disabled = dryButton.disabled = true;
    fill(said, h("p", { class: "muted" }, dryRun ? "Checking…" : "Sending…"));
    try {
      if (draft.kind === "group") await sendToGroup(project, target, dryRun, said);
      else await sendV1(project, target, dryRun, said);
    } catch (error) {
      fill(said, problem(error));
    } finally {
      sendButton.disabled = dryButton.disabled = false;
    }
  };
  dryButton.addEventListener("click", () => send(true));

  fill(main,
    h("h1", {}, "Send a message"),
    // `novalidate`: the browser's own checks stop a send silently when the field they fault is
    // hidden; the console's checks say what is wrong, in the outcome below the buttons.
    h("form", { class: "compose", novalidate: true, onsubmit: (event) => { event.preventDefault(); send(false); } },
      h("section", { class: "card" },
        h("h2", {}, "To"),
        h("div", { class: "row" }, h("div", {}, h("label", { for: "target-kind" }, "Target"), kindSelect), targetField, conditionField),
        audience),
      h("section", { class: "card" },
        h("h2", {}, "Notification"),
        h("label", { for: "title" }, "Title"), titleInput,
        h("label", { for: "body" }, "Body"), bodyInput,
        h("h2", {}, "Data"),
        pairs,
        h("h2", {}, "Options"),
        h("div", { class: "row" },
          h("div", {}, h("label", { for: "priority" }, "Priority"), priority),
          h("div", {}, h("label", { for: "ttl" }, "Time to live (seconds)"), ttl),
          h("div", {}, h("label", { for: "collapse-key" }, "Collapse key"), collapseKey))),
      h("div", { class: "actions sticky" }, sendButton, dryButton,
        h("span", { class: "muted" }, "A dry run checks the message as FCM would (validate_only) and sends nothing.")),
      said));
  showKind();
  drawPairs();
  await reach();

  /** The message as HTTP v1 has it. */
  function v1Message(target) {
    const message = { [draft.kind]: target };
    if (draft.title || draft.body) message.notification = { ...(draft.title ? { title: draft.title } : {}), ...(draft.body ? { body: draft.body } : {}) };
    const data = Object.fromEntries(draft.data.filter(([name]) => name.trim()).map(([name, value]) => [name.trim(), value]));
    if (Object.keys(data).length) message.data = data;
    message.android = { priority: draft.priority === "high" ? "HIGH" : "NORMAL" };
    if (draft.ttl !== "") message.android.ttl = `${Number(draft.ttl)}s`;
    if (draft.collapseKey) message.android.collapse_key = draft.collapseKey;
    return message;
  }

  async function sendV1(project, target, dryRun, said) {
    const answer = await post(`/v1/projects/${part(project.projectId)}/messages:send`, { message: v1Message(target), validate_only: dryRun });
    if (dryRun) { fill(said, h("p", { class: "done" }, "Valid: FCM would accept this message. Nothing was sent.")); return; }
    const id = String(answer.name || "").split("/").pop();
    location.hash = `#/messages/${encodeURIComponent(id)}`;
  }

  /** A device group through the legacy API, with a fresh notification key from FCM's look-up. */
  async function sendToGroup(project, name, dryRun, said) {
    const headers = { project_id: project.senderId };
    const { notification_key: key } = await get("/fcm/notification", { notification_key_name: name }, { headers });
    const body = { notification_key: key, priority: draft.priority, dry_run: dryRun || undefined };
    if (draft.title || draft.body) body.notification = { title: draft.title || undefined, body: draft.body || undefined };
    const data = Object.fromEntries(draft.data.filter(([field]) => field.trim()).map(([field, value]) => [field.trim(), value]));
    if (Object.keys(data).length) body.data = data;
    if (draft.ttl !== "") body.time_to_live = Number(draft.ttl);
    if (draft.collapseKey) body.collapse_key = draft.collapseKey;
    const before = await get("/api/messages", { pageSize: 1 });
    const answer = await post("/fcm/send", body);
    if (dryRun) { fill(said, h("p", { class: "done" }, `Valid: FCM would accept this message for ${count(answer.success)} members. Nothing was sent.`)); return; }
    // The legacy answer to a group send has no message id: the log's newest entry is this send.
    const after = await get("/api/messages", { pageSize: 1 });
    const newest = after.messages[0];
    if (newest && (!before.messages[0] || newest.id !== before.messages[0].id)) location.hash = `#/messages/${encodeURIComponent(newest.id)}`;
    else fill(said, h("p", { class: "done" }, `Sent to ${count(answer.success)} members; ${count(answer.failure)} failed.`));
  }
}

/** "Reaches 41,203 tokens". */
function reaches(tokens) {
  return h("p", { class: "reach" }, "Reaches ", h("strong", { id: "audience-count", dataset: { count: String(tokens) } }, count(tokens)), tokens === 1 ? " token" : " tokens");
}
