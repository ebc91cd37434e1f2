// The stage between admit and decide on an AI route: what the request asks for is read from its
// body before any limit is asked, because the body decides what it may cost (its model, its
// output ceiling, its prompt) and nothing a client writes elsewhere does. Only an admitted
// request gets here (its credential checked, its route matched), so an unauthenticated client
// cannot make the gateway read a body; an `Expect: 100-continue` upload is invited now.
//
// The body is read whole, bounded by the route's max_body (413 past it: the rest is never read),
// by the listener's request timeout, and by what this process holds of AI bodies at once, in
// all and per caller (body-memory.ts), then forwarded from memory: byte for byte what the
// client sent unless the reservation changed it (ai/request.ts forwardedBody). A caller whose
// refusal this instance already knows is refused before its body is read (pipeline.ts).
import type { IncomingMessage, ServerResponse } from "node:http";
import { type AiOperation, classify } from "../ai/operations.js";
import type { ModelPrice } from "../ai/prices.js";
import { type JsonShape, jsonShape, parseAiRequest } from "../ai/request.js";
import { reservationOf } from "../ai/reserve.js";
import type { AiSettings } from "../ai/settings.js";
import { callerLabel } from "../limits/state-keys.js";
import {
  BODY_MEMORY_PER_VALUE,
  BODY_MEMORY_WEIGHT,
  type BodyMemory,
  type BodyMemoryRefusal,
} from "./body-memory.js";
import { type Admitted, Refusal } from "./context.js";
import { hasBody } from "./headers.js";

const CLOSE = Object.freeze({ connection: "close" });

/** What the stage leaves: the request, read (ctx.ai set, or an unmetered read), or why not. */
export type AiBodyResult = Admitted | Refusal | "gone";

// RFC 9110 §8.3.1: type "/" subtype, parameters after ";", case-insensitive.
const JSON_MEDIA = /^\s*application\/(?:[a-z0-9!#$&^_.+-]+\+)?json\s*(?:;|$)/i;

/**
 * Reads and prices an AI route's request (`ctx.route.ai` is set). Synchronous for a request that
 * is refused at once or passes unread (a GET).
 */
export function readAiBody(ctx: Admitted, memory: BodyMemory): AiBodyResult | Promise<AiBodyResult> {
  const settings = ctx.route.ai!;
  // A WebSocket (the Realtime API) carries its tokens in frames nobody here reads.
  if (ctx.upgrade)
    return new Refusal(
      "no_route",
      "no_route",
      "a WebSocket on an AI route cannot be metered (its usage is in frames the gateway does not read); give it a route of its own",
    );
  const classified = classify(settings.format, ctx.method, ctx.path);
  if (classified.kind === "passthrough") {
    // A read carries no body: one that does would reach the upstream unmetered.
    if (hasBody(ctx.req))
      return new Refusal(
        "bad_request",
        "bad_request",
        `a ${ctx.method} on an AI route carries no body: only a POST to an endpoint it meters is read and priced`,
        CLOSE,
      );
    return ctx;
  }
  if (classified.kind === "refused") {
    return classified.status === 405
      ? new Refusal("method_not_allowed", "bad_request", classified.detail, { allow: "POST" })
      : new Refusal("no_route", "no_route", classified.detail);
  }
  const { operation } = classified;
  const { headers } = ctx.req;
  const contentType = headerText(headers["content-type"]) ?? "";
  if (!JSON_MEDIA.test(contentType))
    return new Refusal(
      "unsupported_media_type",
      "bad_request",
      "an AI route reads the request body as JSON: send it with Content-Type: application/json",
      CLOSE,
    );
  const charset = CHARSET.exec(contentType)?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== "utf-8" && charset !== "utf8")
    return new Refusal(
      "unsupported_media_type",
      "bad_request",
      `an AI route reads JSON as UTF-8, not ${charset}: send it as UTF-8`,
      CLOSE,
    );
  const encoding = headerText(headers["content-encoding"])?.trim().toLowerCase();
  if (encoding && encoding !== "identity")
    return new Refusal(
      "unsupported_media_type",
      "bad_request",
      `an AI route reads the request body, and cannot read one sent with Content-Encoding: ${encoding}; send it uncompressed`,
      CLOSE,
    );
  // Admitted: now the body may come (Expect: 100-continue, see admit); forward will not ask again.
  const keepAlive = ctx.keepAliveAfterContinue;
  if (keepAlive !== undefined) {
    ctx.keepAliveAfterContinue = undefined;
    ctx.res.shouldKeepAlive = keepAlive;
    ctx.res.writeContinue();
  }
  const maxBody = ctx.route.maxBody ?? Number.POSITIVE_INFINITY;
  const holder = callerLabel(ctx.caller);
  let held = 0;
  // What the body holds is given back once, when the request is forwarded or answered.
  ctx.releaseBody = () => {
    ctx.releaseBody = undefined;
    memory.give(holder, held);
    held = 0;
  };
  const take = (counted: number): BodyMemoryRefusal | undefined => {
    const refused = memory.take(holder, counted);
    if (refused === undefined) held += counted;
    return refused;
  };
  return readBody(ctx.req, ctx.res, maxBody, (bytes) => take(bytes * BODY_MEMORY_WEIGHT)).then(
    (body): AiBodyResult => {
      if (body === "gone") return "gone";
      if (body === "too_large")
        return new Refusal(
          "body_too_large",
          "bad_request",
          `the request body is larger than ${maxBody} bytes, this route's max_body`,
          CLOSE,
        );
      if (body === "gateway" || body === "caller") return memoryRefusal(body, memory);
      const shape = jsonShape(body);
      if (shape.problem) return new Refusal("bad_request", "bad_request", shape.problem);
      const parsing = take(shape.values * BODY_MEMORY_PER_VALUE);
      if (parsing) return memoryRefusal(parsing, memory);
      return priced(ctx, settings, operation, body, shape);
    },
  );
}

/** A body this process cannot hold now: 503 when it is busy, 429 when the caller sends too much at once. */
function memoryRefusal(who: BodyMemoryRefusal, memory: BodyMemory): Refusal {
  return who === "gateway"
    ? new Refusal(
        "temporary_reduced_capacity",
        "degraded_closed",
        "the gateway is reading as many request bodies as it holds at once; retry in a moment",
        CLOSE,
        1,
      )
    : new Refusal(
        "quota_exceeded",
        "limited",
        `this caller's request bodies being read at once pass its share of this instance's memory for them (at most ${Math.round(memory.perCaller / 1024 / 1024)} MiB, ${Math.round(memory.sure / 1024 / 1024)} MiB while others need it); send fewer at a time`,
        CLOSE,
        1,
      );
}

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]+)/i;

const DEPLOYMENT_SEGMENT = /\/(?:deployments|engines)\/[^/]+\//gi;

/**
 * The model an Azure-style (`/openai/deployments/<d>/…`) or legacy (`/engines/<m>/…`) path names:
 * the upstream serves that one, whatever the body's `model` says.
 */
export function pathModel(path: string): string | undefined {
  const m = /\/(?:deployments|engines)\/([^/]+)\//i.exec(path);
  if (!m) return undefined;
  try {
    return decodeURIComponent(m[1]!);
  } catch {
    return m[1];
  }
}

/** The request read from its body, priced and reserved; or the 400 that says why it cannot be. */
function priced(
  ctx: Admitted,
  settings: AiSettings,
  operation: AiOperation,
  body: Buffer,
  shape: JsonShape,
): Admitted | Refusal {
  // `/openai/deployments/a/openai/deployments/b/…`: the gateway reads the first, an upstream may
  // route by the last.
  if ((ctx.path.match(DEPLOYMENT_SEGMENT) ?? []).length > 1)
    return new Refusal(
      "bad_request",
      "bad_request",
      "the path names more than one deployment or engine; name the model's once",
    );
  const parsed = parseAiRequest(body, operation, settings, pathModel(ctx.path), shape);
  if (!parsed.ok) return new Refusal("bad_request", "bad_request", parsed.detail);
  const request = parsed.request;
  let price: ModelPrice | undefined;
  if (!request.operation.free && moneyApplies(ctx)) {
    const tier = typeof request.fields.service_tier === "string" ? request.fields.service_tier : undefined;
    price = ctx.gen.runtime.prices?.priceOf(request.model, tier);
    if (price === undefined)
      return new Refusal(
        "bad_request",
        "bad_request",
        request.model === undefined
          ? "the request names no model, and this gateway prices requests by their model (its budgets are in dollars): name one"
          : tier !== undefined && ctx.gen.runtime.prices?.priceOf(request.model) !== undefined
            ? `service_tier "${tier}" of "${request.model}" has no price in this gateway's models table (a row "${request.model}@${tier}"), and this request's budgets are in dollars: ask for the default tier`
            : `the model "${request.model}" has no price in this gateway's models table, and this request's budgets are in dollars: ask for a priced model`,
      );
    const audio = audioOf(request.fields);
    if ((audio.input && price.audioInput === undefined) || (audio.output && price.audioOutput === undefined))
      return new Refusal(
        "bad_request",
        "bad_request",
        `the request ${audio.output ? "asks for" : "sends"} audio, and "${request.model}" has no audio price in this gateway's models table (audio_input, audio_output), while its budgets are in dollars`,
      );
  }
  ctx.ai = { request, price, reservation: reservationOf(request, settings, price) };
  return ctx;
}

/** Whether an OpenAI-style request sends audio (input_audio parts) or asks for it (modalities, audio). */
function audioOf(fields: Readonly<Record<string, unknown>>): { input: boolean; output: boolean } {
  const output =
    (Array.isArray(fields.modalities) && fields.modalities.includes("audio")) ||
    (fields.audio !== undefined && fields.audio !== null);
  let input = false;
  if (Array.isArray(fields.messages))
    for (const m of fields.messages) {
      const content = (m as { content?: unknown } | null)?.content;
      if (
        Array.isArray(content) &&
        content.some((p) => (p as { type?: unknown } | null)?.type === "input_audio")
      )
        input = true;
    }
  return { input, output };
}

/** Whether a money budget binds this request (its plan's limits for the route, or the route's). */
function moneyApplies(ctx: Admitted): boolean {
  const limits = ctx.caller.plan?.limitsByRoute.get(ctx.route.name) ?? ctx.route.limits;
  for (const l of limits) if (l.spec.unit === "usd") return true;
  return false;
}

/**
 * The whole body, "too_large" once it passes `maxBody`, the bound it would pass of what this
 * process holds (it is no longer read, either way), or "gone" when the client left (or its
 * stream was reset) before it ended.
 */
function readBody(
  req: IncomingMessage,
  res: ServerResponse,
  maxBody: number,
  take: (bytes: number) => BodyMemoryRefusal | undefined,
): Promise<Buffer | "too_large" | "gone" | BodyMemoryRefusal> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let length = 0;
    const done = (result: Buffer | "too_large" | "gone" | BodyMemoryRefusal) => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onGone);
      req.off("aborted", onGone);
      res.off("close", onGone);
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      length += chunk.length;
      if (length > maxBody) {
        req.pause();
        done("too_large");
        return;
      }
      const refused = take(chunk.length);
      if (refused) {
        req.pause();
        done(refused);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => done(Buffer.concat(chunks, length));
    const onGone = () => done("gone");
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", onGone);
    req.once("aborted", onGone);
    res.once("close", onGone);
    if (req.readableEnded) onEnd();
  });
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
