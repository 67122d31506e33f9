// The audit log: every change made with an admin key or through this console, and every key
// event, newest first (GET /api/audit), with the key and client that made it.
import { get } from "./api.js";
import { fill, h, live, Pager, problem, refill, table, when } from "./dom.js";

/** The actions `GET /api/audit` can filter on, as docs/http-api.md lists them. */
const actions = [
  "key.created", "key.revoked", "key.rotated",
  "webhook.created", "webhook.deleted", "webhook.secretRotated", "webhook.enabled", "webhook.retried",
  "token.unregistered", "fault.injected", "fault.cleared", "message.cancelled", "xmpp.drained",
  "relay.enabled", "relay.disabled", "mirror.enabled", "mirror.disabled",
];

const every = 10000;

/** `{"name":"dashboard","scopes":"read"}` as `name: dashboard · scopes: read`. */
function details(entry) {
  const pairs = Object.entries(entry.details || {});
  if (!pairs.length) return h("span", { class: "muted" }, "—");
  return pairs.map(([name, value], index) => [index ? " · " : "", h("span", { class: "muted" }, `${name}: `), value]);
}

/** Who: the key's name and id, the command line, or an access token. */
function who(entry) {
  if (entry.keyId === null) return entry.client === "cli" ? "command line" : entry.keyName || "access token";
  return [entry.keyName || h("span", { class: "muted" }, "unnamed key"), h("span", { class: "muted" }, ` #${entry.keyId}`)];
}

export async function auditView(main, { signal }) {
  let action = "";
  const listing = h("div");
  const status = h("div", { role: "status", "aria-live": "polite" });
  const pager = new Pager(async (pageToken, current) => {
    const page = await get("/api/audit", { action, pageSize: 50, pageToken });
    if (signal.aborted || !current()) return undefined;
    refill(listing, table({
      caption: action ? `Changes of kind ${action}, newest first` : "Changes, newest first",
      columns: [
        { label: "When", value: (entry) => when(entry.at) },
        { label: "Action", className: "action", value: (entry) => h("code", {}, entry.action) },
        { label: "Target", className: "target", value: (entry) => entry.target },
        { label: "By", value: who },
        { label: "Client", className: "client", value: (entry) => entry.client },
        { label: "Details", value: details },
      ],
      rows: page.entries,
      empty: action ? `No ${action} in the audit log.` : "No change recorded yet.",
    }));
    return page.nextPageToken;
  });
  const select = h("select", { id: "audit-action", onchange: () => { action = select.value; pager.first().catch((error) => fill(status, problem(error))); } },
    h("option", { value: "" }, "Every action"),
    actions.map((name) => h("option", { value: name }, name)));
  fill(main,
    h("h1", {}, "Audit log"),
    h("p", { class: "muted" }, "Every change made with an admin key or through this console, and every key made, rotated or revoked (the command line's too). Kept 90 days unless the server says otherwise."),
    h("div", { class: "row inline" }, h("label", { for: "audit-action" }, "Action"), select),
    status, listing, pager.element);
  await pager.first().catch((error) => fill(status, problem(error)));
  live(signal, () => pager.refresh(), every);
}
