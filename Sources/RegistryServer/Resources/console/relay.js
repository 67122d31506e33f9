// Delivery through FCM: the relay's queue, rate, pauses and pruned tokens, and the deliveries per
// minute measured from its counters while the console is open.
import { get } from "./api.js";
import { figure, lineChart } from "./chart.js";
import { count, facts, fill, h, stats, when } from "./dom.js";

/** How often the counters are read, and how many readings are kept (an hour). */
const sampleEvery = 10_000;
const keep = 360;

/** `{at, delivered}` readings of the project's delivered counter, oldest first. */
let samples = [];
let sampler;

async function sample() {
  try {
    const answer = await get("/api/relay");
    const delivered = answer.projects.reduce((sum, project) => sum + project.delivered, 0);
    samples.push({ at: new Date(), delivered });
    if (samples.length > keep) samples = samples.slice(-keep);
  } catch {
    // A missed reading leaves a gap; the next one measures over it.
  }
}

/** Starts reading the counters (on signing in). */
export function startSampling() {
  stopSampling();
  samples = [];
  sample();
  sampler = setInterval(sample, sampleEvery);
}

export function stopSampling() {
  clearInterval(sampler);
  samples = [];
}

/** Deliveries per minute between consecutive readings: `{at, value}`. */
export function deliveryRate() {
  const rates = [];
  for (let index = 1; index < samples.length; index += 1) {
    const before = samples[index - 1], after = samples[index];
    const minutes = (after.at - before.at) / 60_000;
    if (minutes > 0) rates.push({ at: after.at, value: Math.max(0, after.delivered - before.delivered) / minutes });
  }
  return rates;
}

export async function relayView(main, { signal }) {
  const body = h("div");
  const rate = h("div");
  fill(main, h("h1", {}, "Relay"), body, rate);
  const refresh = async () => {
    const answer = await get("/api/relay");
    if (signal.aborted) return;
    const rates = deliveryRate();
    fill(body, answer.projects.length
      ? answer.projects.map((project) => h("section", { class: "card" },
          h("h2", {}, `Delivering to Firebase project ${project.firebaseProjectId}`),
          facts([
            ["Upstream", project.upstream],
            ["Paused until", project.pausedUntil ? h("span", { class: "badge pending" }, when(project.pausedUntil)) : "not paused"],
            ["Last error", project.lastError ? h("span", { class: "badge failed" }, project.lastError) : "none"],
            ["Rate", rates.length ? `${count(Math.round(rates[rates.length - 1].value))} deliveries a minute, over the last ${sampleEvery / 1000} s` : "measuring…"],
          ]),
          stats([
            ["Queued", project.pending, "pending"], ["In flight", project.inFlight, "inFlight"],
            ["Delivered", project.delivered, "delivered"], ["Failed", project.failed, "failed"],
            ["Pruned tokens", project.pruned, "pruned"],
          ]),
          h("p", { class: "muted" }, "Pruned tokens are those FCM answered UNREGISTERED or SENDER_ID_MISMATCH: the registry unregistered them, so they left their groups and topics.")))
      : h("section", { class: "card" },
          h("p", {}, "This project does not relay: messages are checked and logged, not delivered."),
          h("p", { class: "muted" }, "Turn delivery on with fcm-registry project relay --project-id … --service-account firebase-sa.json (docs/relay.md).")));
    fill(rate, figure("Deliveries per minute", lineChart(rates, { title: "Deliveries per minute, measured while this tab is open", unit: "per min" })));
  };
  await refresh();
  if (signal.aborted) return;
  const timer = setInterval(() => refresh().catch(() => {}), 5000);
  signal.addEventListener("abort", () => clearInterval(timer));
}
