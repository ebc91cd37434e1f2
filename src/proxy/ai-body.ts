// The stage between admit and decide on an AI route: what the request asks for is read from its
// body before any limit is asked, because the body decides what it may cost (its model, its
// output ceiling, its prompt) and nothing a client writes elsewhere does. Only an admitted
// request gets here (its credential checked, its route matched), so an unauthenticated client
// cannot make the gateway read a body; an `Expect: 100-continue` upload is invited now.
//
// The body is read whole, bounded by the route's max_body (413 past it: the rest is never read)
// and by the listener's request timeout, then forwarded from memory: byte for byte what the
// client sent unless the reservation changed it (ai/request.ts forwardedBody).
import type { IncomingMessage, ServerResponse } from "node:http";
import { type AiOperation, classify } from "../ai/operations.js";
import type { ModelPrice } from "../ai/prices.js";
import { parseAiRequest } from "../ai/request.js";
import { reservationOf } from "../ai/reserve.js";
import type { AiSettings } from "../ai/settings.js";
import { type Admitted, Refusal } from "./context.js";

const CLOSE = Object.freeze({ connection: "close" });

/** What the stage leaves: the request, read (ctx.ai set, or an unmetered read), or why not. */
export type AiBodyResult = Admitted | Refusal | "gone";

// RFC 9110 §8.3.1: type "/" subtype, parameters after ";", case-insensitive.
const JSON_MEDIA = /^\s*application\/(?:[a-z0-9!#$&^_.+-]+\+)?json\s*(?:;|$)/i;

/**
 * Reads and prices an AI route's request (`ctx.route.ai` is set). Synchronous for a request that
 * is refused at once or passes unread (a GET).
 */
export function readAiBody(ctx: Admitted): AiBodyResult | Promise<AiBodyResult> {
  const settings = ctx.route.ai!;
  const classified = classify(settings.format, ctx.method, ctx.path);
  if (classified.kind === "passthrough") return ctx;
  if (classified.kind === "refused") {
    return classified.status === 405
      ? new Refusal("method_not_allowed", "bad_request", classified.detail, { allow: "POST" })
      : new Refusal("no_route", "no_route", classified.detail);
  }
  const { operation } = classified;
  const { headers } = ctx.req;
  if (!JSON_MEDIA.test(headerText(headers["content-type"]) ?? ""))
    return new Refusal(
      "unsupported_media_type",
      "bad_request",
      "an AI route reads the request body as JSON: send it with Content-Type: application/json",
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
  return readBody(ctx.req, ctx.res, maxBody).then((body): AiBodyResult => {
    if (body === "gone") return "gone";
    if (body === "too_large")
      return new Refusal(
        "body_too_large",
        "bad_request",
        `the request body is larger than ${maxBody} bytes, this route's max_body`,
        CLOSE,
      );
    return priced(ctx, settings, operation, body);
  });
}

/** The request read from its body, priced and reserved; or the 400 that says why it cannot be. */
function priced(
  ctx: Admitted,
  settings: AiSettings,
  operation: AiOperation,
  body: Buffer,
): Admitted | Refusal {
  const parsed = parseAiRequest(body, operation, settings);
  if (!parsed.ok) return new Refusal("bad_request", "bad_request", parsed.detail);
  const request = parsed.request;
  let price: ModelPrice | undefined;
  if (!request.operation.free && moneyApplies(ctx)) {
    price = ctx.gen.runtime.prices?.priceOf(request.model);
    if (price === undefined)
      return new Refusal(
        "bad_request",
        "bad_request",
        request.model === undefined
          ? "the request names no model, and this gateway prices requests by their model (its budgets are in dollars): name one"
          : `the model "${request.model}" has no price in this gateway's models table, and this request's budgets are in dollars: ask for a priced model`,
      );
  }
  ctx.ai = { request, price, reservation: reservationOf(request, settings, price) };
  return ctx;
}

/** Whether a money budget binds this request (its plan's limits for the route, or the route's). */
function moneyApplies(ctx: Admitted): boolean {
  const limits = ctx.caller.plan?.limitsByRoute.get(ctx.route.name) ?? ctx.route.limits;
  for (const l of limits) if (l.spec.unit === "usd") return true;
  return false;
}

/**
 * The whole body, "too_large" once it passes `maxBody` (it is no longer read), or "gone" when
 * the client left (or its stream was reset) before it ended.
 */
function readBody(
  req: IncomingMessage,
  res: ServerResponse,
  maxBody: number,
): Promise<Buffer | "too_large" | "gone"> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let length = 0;
    const done = (result: Buffer | "too_large" | "gone") => {
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
