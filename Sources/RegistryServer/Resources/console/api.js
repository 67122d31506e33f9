// The documented API, called with the server key this tab signed in with. The key lives only in
// the tab's session storage: closing the tab forgets it, and no other tab or site can read it.

const keyName = "fcm-registry.serverKey";

/** An answer that was not 2xx, with the message of the API's error envelope. */
export class APIError extends Error {
  constructor(status, body, text) {
    super(messageOf(status, body, text));
    this.status = status;
    this.body = body;
  }
}

function messageOf(status, body, text) {
  const error = body && body.error;
  if (error && typeof error === "object" && error.message) return error.message;
  if (typeof error === "string") return error;
  return `${status}: ${(text || "").slice(0, 200) || "no answer"}`;
}

export function serverKey() {
  return sessionStorage.getItem(keyName);
}

export function remember(key) {
  sessionStorage.setItem(keyName, key);
}

export function forget() {
  sessionStorage.removeItem(keyName);
}

/** Called when the key stops working (revoked, or another server's): the console signs out. */
let onUnauthorized = () => {};
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

/** A call to the API. Paths are relative, so the console works behind a proxy's path prefix. */
export async function call(method, path, { body, query, headers = {}, key = serverKey() } = {}) {
  // Percent-encoded by hand: URLSearchParams writes a space as "+", which the API reads as "+".
  const pairs = Object.entries(query || {})
    .filter(([, value]) => value !== undefined && value !== null && value !== "")
    .map(([name, value]) => `${encodeURIComponent(name)}=${encodeURIComponent(value)}`);
  const url = new URL(path.replace(/^\//, "") + (pairs.length ? `?${pairs.join("&")}` : ""), document.baseURI);
  pending(+1);
  let response, text;
  try {
    response = await fetch(url, {
      method,
      cache: "no-store",
      // The console names itself, so the server's access log says which requests (and sends) came from it.
      headers: { Authorization: `key=${key}`, "X-Registry-Client": "console", ...(body ? { "Content-Type": "application/json" } : {}), ...headers },
      body: body ? JSON.stringify(body) : undefined,
    });
    text = await response.text();
  } finally {
    pending(-1);
  }
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { json = null; }
  if (response.status === 401) onUnauthorized();
  if (!response.ok) throw new APIError(response.status, json, text);
  return json;
}

/** Calls under way, on <html data-pending>: what a test waits on before it reads a screen. */
let underWay = 0;
function pending(change) {
  underWay += change;
  document.documentElement.dataset.pending = String(underWay);
}

export const get = (path, query, options = {}) => call("GET", path, { ...options, query });
export const post = (path, body, options = {}) => call("POST", path, { ...options, body });
export const del = (path, options = {}) => call("DELETE", path, options);

/** A path segment: tokens and message ids hold ":" and "%". */
export const part = (value) => encodeURIComponent(value);
