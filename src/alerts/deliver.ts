// One try of one delivery: a JSON POST to its target, signed, bounded by the target's timeout.
// A 2xx is delivered; anything else (another status, a refused connection, no answer in time) is
// a failure the caller retries. Redirects are not followed: a receiver that moved is a failure
// an operator sees in the metrics, not a signed body sent somewhere the config never named.
import { Agent, request } from "undici";
import { signature } from "./events.js";
import type { Delivery } from "./queue.js";
import type { AlertTarget } from "./settings.js";

/** What a try came to: sent, or why not (a status, or what failed), for the log. */
export type Sent = { ok: true; status: number } | { ok: false; why: string };

export type Send = (target: AlertTarget, delivery: Delivery) => Promise<Sent>;

/** A small pool of its own: alerts never take a connection an upstream's requests need. */
export function createSender(now: () => number = Date.now): { send: Send; close: () => Promise<void> } {
  const agent = new Agent({ connections: 4, keepAliveTimeout: 4000, connect: { timeout: 5000 } });
  const send: Send = async (target, delivery) => {
    const t = Math.floor(now() / 1000);
    try {
      const res = await request(target.url, {
        method: "POST",
        dispatcher: agent,
        headers: {
          "content-type": "application/json",
          "user-agent": "tollgate-alerts",
          "tollgate-event": delivery.event,
          "tollgate-signature": signature(target.secret, delivery.body, t),
          "tollgate-delivery": delivery.id,
        },
        body: delivery.body,
        headersTimeout: target.timeoutMs,
        bodyTimeout: target.timeoutMs,
        signal: AbortSignal.timeout(target.timeoutMs),
      });
      // The answer's body is not read, only let go, so the connection is reused.
      await res.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
      return res.statusCode >= 200 && res.statusCode < 300
        ? { ok: true, status: res.statusCode }
        : { ok: false, why: `answered ${res.statusCode}` };
    } catch (err) {
      return { ok: false, why: reasonOf(err) };
    }
  };
  return { send, close: () => agent.close() };
}

/** What failed, in words that never carry the URL (it may hold a token). */
function reasonOf(err: unknown): string {
  const e = err as { name?: string; code?: string };
  if (e.name === "TimeoutError" || e.name === "AbortError" || e.code === "UND_ERR_HEADERS_TIMEOUT")
    return "no answer in time";
  if (typeof e.code === "string") return `connection failed (${e.code})`;
  return "connection failed";
}
