// How an AI request's reservation is settled once its answer is known (src/proxy/settle.ts),
// without a store: the limiter's settle is recorded. Each outcome: usage reported (the rest
// given back, an excess debited), nothing usable (the reservation stands), an error or a request
// that never left the gateway (all but the route's cost back).
import { describe, expect, it } from "vitest";
import { OPERATIONS } from "../../src/ai/operations.js";
import { parseAiRequest } from "../../src/ai/request.js";
import { reservationOf } from "../../src/ai/reserve.js";
import { compiledLimit } from "../../src/limits/compiled.js";
import type { AllowedDecision } from "../../src/limits/decision.js";
import type { LimitSpec } from "../../src/limits/spec.js";
import { admit } from "../../src/proxy/admit.js";
import type { Admitted, RequestLimiter } from "../../src/proxy/context.js";
import { releaseUnforwarded, SettleReservation } from "../../src/proxy/settle.js";
import type { ForwardHandler } from "../../src/proxy/stream.js";
import { contextFor, fakeRequest, runtimeOf, testEnv } from "./support/proxy-fakes.js";

const rt = runtimeOf(`
store: { url: "memory://" }
upstreams: { api: "http://127.0.0.1:1" }
routes:
  - { name: chat, match: { path: /v1 }, upstream: api, cost: 1, ai: { format: openai, max_output: 1000 } }
`);

const tokens: LimitSpec = {
  algorithm: "fixed_window",
  name: "t.tokens",
  limit: 1e6,
  windowMs: 60_000,
  unit: "tokens",
};
const requests: LimitSpec = { algorithm: "fixed_window", name: "t.requests", limit: 100, windowMs: 60_000 };

function setup() {
  const env = testEnv();
  const settled: number[][] = [];
  const limiter: RequestLimiter = {
    check: () => {
      throw new Error("not asked");
    },
    postCharge: () => {
      throw new Error("not asked");
    },
    settle: async (_checks, _at, deltas) => {
      settled.push([...deltas]);
      return { ok: true, charged: [] };
    },
  };
  const ctx = contextFor(
    env,
    rt,
    fakeRequest({ url: "/v1/chat/completions", method: "POST", headers: [["Host", "gw"]] }),
    undefined,
    limiter,
  );
  const a = admit(ctx, env) as Admitted;
  const settings = a.route.ai!;
  const chat = OPERATIONS.openai.find((o) => o.name === "chat")!;
  const parsed = parseAiRequest(Buffer.from('{"model":"m","max_tokens":500,"messages":[]}'), chat, settings);
  if (!parsed.ok) throw new Error(parsed.detail);
  a.ai = {
    request: parsed.request,
    price: undefined,
    reservation: reservationOf(parsed.request, settings, undefined),
  };
  const reserved = parsed.request.promptBound + 500;
  const decision: AllowedDecision = {
    kind: "allowed",
    applied: [
      {
        limit: compiledLimit(tokens, 1),
        spec: tokens,
        outcome: { allowed: true, remaining: 1, resetMs: 1, retryAfterMs: 0 },
      },
      {
        limit: compiledLimit(requests, 1),
        spec: requests,
        outcome: { allowed: true, remaining: 1, resetMs: 1, retryAfterMs: 0 },
      },
    ],
    checks: [
      { key: "k1", spec: tokens, cost: reserved },
      { key: "k2", spec: requests, cost: 1 },
    ],
    delayMs: 0,
    decidedAt: 1,
  };
  const end: ForwardHandler = { onResponseHead: () => null, onDone: () => {} };
  const handler = new SettleReservation(end, env, a, a.ai, decision, undefined);
  return { handler, settled, reserved, env, ctx: a, decision };
}

const usageBody = (prompt: number, completion: number) =>
  Buffer.from(JSON.stringify({ usage: { prompt_tokens: prompt, completion_tokens: completion } }));

describe("SettleReservation", () => {
  it("usage reported: each token budget moves to it, the rest of the reservation given back", async () => {
    const { handler, settled, reserved } = setup();
    handler.onResponseHead({ "content-type": "application/json" }, 200);
    handler.onResponseData!(usageBody(20, 100));
    await handler.onResponseEnd!({});
    handler.onDone({ status: 200, reached: true });
    expect(settled).toEqual([[120 - reserved, 0]]);
  });

  it("usage beyond the reservation: the excess is debited", async () => {
    const { handler, settled, reserved, env } = setup();
    handler.onResponseHead({ "content-type": "application/json" }, 200);
    handler.onResponseData!(usageBody(reserved, 10));
    await handler.onResponseEnd!({});
    expect(settled).toEqual([[10, 0]]);
    expect(await env.metrics.registry.getSingleMetricAsString("tollgate_ai_overrun_total")).toContain(
      'tollgate_ai_overrun_total{route="chat",unit="tokens"} 10',
    );
  });

  it("nothing usable (a 2xx without usage, a compressed body, a cut stream): the reservation stands", async () => {
    for (const run of [
      async (h: SettleReservation) => {
        h.onResponseHead({ "content-type": "application/json" }, 200);
        h.onResponseData!(Buffer.from("{}"));
        await h.onResponseEnd!({});
      },
      async (h: SettleReservation) => {
        h.onResponseHead({ "content-type": "application/json", "content-encoding": "gzip" }, 200);
        h.onResponseData!(usageBody(1, 1));
        await h.onResponseEnd!({});
      },
      async (h: SettleReservation) => {
        h.onResponseHead({ "content-type": "text/event-stream" }, 200);
        h.onResponseData!(
          Buffer.from(`data: ${JSON.stringify({ usage: { prompt_tokens: 1, completion_tokens: 1 } })}\n\n`),
        );
        h.onDone({ status: 200, clientGone: true, reached: true });
      },
      async (h: SettleReservation) => h.onDone({ status: 499, clientGone: true, reached: true }),
    ]) {
      const { handler, settled } = setup();
      await run(handler);
      expect(settled).toEqual([]);
    }
  });

  it("an error answer, or a request that never left the gateway: all but the route's cost back", async () => {
    const error = setup();
    error.handler.onResponseHead({ "content-type": "application/json" }, 429);
    error.handler.onResponseData!(Buffer.from('{"error":{"message":"slow down"}}'));
    await error.handler.onResponseEnd!({});
    expect(error.settled, "error").toEqual([[1 - error.reserved, 0]]);
    const unsent = setup();
    unsent.handler.onDone({ status: 502, failure: "refused", reached: false });
    await new Promise((r) => setImmediate(r));
    expect(unsent.settled, "unsent").toEqual([[1 - unsent.reserved, 0]]);
    const queued = setup();
    releaseUnforwarded(queued.env, queued.ctx, queued.decision);
    await new Promise((r) => setImmediate(r));
    expect(queued.settled, "queued").toEqual([[1 - queued.reserved, 0]]);
  });
});
