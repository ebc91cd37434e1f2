// The CLI's one way to the admin API: where it is (TOLLGATE_ADMIN_URL), with which token
// (TOLLGATE_ADMIN_TOKEN), and one request with a deadline. The token goes in the Authorization
// header and nowhere else: no message here quotes it, nor a URL that could carry credentials, so
// an error pasted into a ticket leaks nothing.
import type { AdminRequest } from "./admin-args.js";

/** The whole exchange, answer body included: an admin API that hangs fails the command. */
export const ADMIN_TIMEOUT_MS = 10_000;

export interface AdminTarget {
  /** Origin plus any path prefix (a proxy in front), without a trailing slash. */
  base: string;
  token: string;
}

/**
 * The target named by the environment, or one line per variable that is missing or unusable.
 * A value is never echoed: a URL may hold credentials, and a token is a secret.
 */
export function adminTarget(
  env: Readonly<Record<string, string | undefined>>,
): { ok: true; target: AdminTarget } | { ok: false; problems: string[] } {
  const problems: string[] = [];
  const rawUrl = env.TOLLGATE_ADMIN_URL;
  let base = "";
  if (!rawUrl)
    problems.push("TOLLGATE_ADMIN_URL is not set: the admin API's address, e.g. http://127.0.0.1:9090");
  else {
    const url = URL.canParse(rawUrl) ? new URL(rawUrl) : undefined;
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:"))
      problems.push("TOLLGATE_ADMIN_URL is not an http:// or https:// URL, e.g. http://127.0.0.1:9090");
    else if (url.username || url.password)
      problems.push(
        "TOLLGATE_ADMIN_URL must not carry credentials: put the admin token in TOLLGATE_ADMIN_TOKEN",
      );
    else if (url.search || url.hash)
      problems.push(
        "TOLLGATE_ADMIN_URL must not have a query or a fragment: give the admin listener's address",
      );
    else base = `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
  }
  const token = env.TOLLGATE_ADMIN_TOKEN;
  if (!token)
    problems.push(
      "TOLLGATE_ADMIN_TOKEN is not set: one of the gateway's admin tokens (admin.tokens, or admin.token)",
    );
  // A header value carries visible ASCII only: undici would refuse anything else, and a newline
  // in a header is how requests are split.
  else if (!/^[\x21-\x7e]+$/.test(token))
    problems.push(
      "TOLLGATE_ADMIN_TOKEN holds a space, a control character (a trailing newline?) or a non-ASCII character: a token is visible ASCII only",
    );
  return problems.length ? { ok: false, problems } : { ok: true, target: { base, token: token! } };
}

export type AdminReply =
  | { kind: "answer"; status: number; contentType: string; text: string }
  | { kind: "unreachable"; why: string };

/** One HTTP exchange, the answer's body read in full; rejects when there is no answer. */
export type Transport = (
  url: string,
  init: { method: string; headers: Record<string, string>; body: string | undefined; signal: AbortSignal },
) => Promise<{ status: number; contentType: string; text: string }>;

/**
 * undici's request rather than fetch: fetch refuses the ports browsers block (an admin listener
 * on 6000 or 6665 would be unreachable), and request follows no redirect, so the token is never
 * sent anywhere but TOLLGATE_ADMIN_URL. The signal bounds the body's reading too.
 */
export const undiciTransport: Transport = async (url, init) => {
  const { request } = await import("undici");
  const res = await request(url, init);
  const text = await res.body.text();
  const type = res.headers["content-type"];
  return { status: res.statusCode, contentType: Array.isArray(type) ? type.join(", ") : (type ?? ""), text };
};

export interface CallOptions {
  transport?: Transport;
  timeoutMs?: number;
}

/** Sends `request`; never throws: a failure to get an answer is `unreachable`, saying why. */
export async function callAdmin(
  target: AdminTarget,
  request: AdminRequest,
  options: CallOptions = {},
): Promise<AdminReply> {
  const transport = options.transport ?? undiciTransport;
  const timeoutMs = options.timeoutMs ?? ADMIN_TIMEOUT_MS;
  const headers: Record<string, string> = {
    authorization: `Bearer ${target.token}`,
    accept: "application/json, application/problem+json",
  };
  if (request.body !== undefined) headers["content-type"] = "application/json";
  try {
    const answer = await transport(target.base + request.path, {
      method: request.method,
      headers,
      body: request.body === undefined ? undefined : JSON.stringify(request.body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    return { kind: "answer", ...answer };
  } catch (err) {
    return { kind: "unreachable", why: whyUnreachable(err, timeoutMs) };
  }
}

/**
 * The failure in words. Only the error's name and code are read (undici's, or the cause's as
 * fetch wraps them): a message can quote the request, a header value among them.
 */
export function whyUnreachable(err: unknown, timeoutMs: number): string {
  const name = err instanceof Error || err instanceof DOMException ? err.name : "";
  if (name === "TimeoutError" || name === "AbortError") return `no answer within ${timeoutMs / 1000} s`;
  const codeOf = (e: unknown) => {
    const code = typeof e === "object" && e !== null ? (e as { code?: unknown }).code : undefined;
    return typeof code === "string" ? code : undefined;
  };
  const code = codeOf(err) ?? (err instanceof Error ? codeOf(err.cause) : undefined);
  const words: Record<string, string> = {
    ECONNREFUSED: "connection refused (is the gateway running, and is this its admin listener?)",
    ENOTFOUND: "no such host",
    EAI_AGAIN: "the host name could not be resolved",
    ECONNRESET: "the connection was reset",
    ETIMEDOUT: "the connection timed out",
    EHOSTUNREACH: "the host is unreachable",
    UND_ERR_SOCKET: "the connection was closed before an answer",
    UND_ERR_HEADERS_TIMEOUT: `no answer within ${timeoutMs / 1000} s`,
    UND_ERR_BODY_TIMEOUT: `no answer within ${timeoutMs / 1000} s`,
  };
  if (code === undefined) return "the request failed before an answer";
  if (Object.hasOwn(words, code)) return `${words[code]} (${code})`;
  if (/^(ERR_TLS|ERR_SSL|CERT_|UNABLE_TO|DEPTH_ZERO|SELF_SIGNED)/.test(code))
    return `TLS: the admin listener's certificate was not accepted (${code})`;
  return code;
}
