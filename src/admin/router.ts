// The admin listener's dispatch: a table of method + path pattern → handler, compiled once.
// In order: the guard (the operator API's token and its scope, asked once for every path behind
// it; the principal it found is handed to the handler), the path (404 no-endpoint), its
// parameters (400 when an escape is not UTF-8), the method (405 with Allow), the handler. A
// handler's failure is answered here too: a ProblemError as its problem, anything else as a 500
// that names only the request id, the error itself going to the log.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { ProblemCode } from "../http/problem.js";
import { requestIdOf } from "../http/request-id.js";
import type { AdminPrincipal, Guard } from "./auth.js";
import { ProblemError, replyProblem } from "./reply.js";

export interface AdminRequest {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** The pattern's parameters, percent-decoded. */
  readonly params: Readonly<Record<string, string>>;
  /**
   * The query string. URLSearchParams never throws: a malformed escape is kept as written, and
   * one that is not UTF-8 becomes U+FFFD.
   */
  readonly query: URLSearchParams;
  /**
   * The admin token that authorised the request (its name and scope, never the token), as the
   * guard found it; undefined behind a guard that names nobody (the probes).
   */
  readonly principal?: AdminPrincipal | undefined;
}

export type AdminHandler = (request: AdminRequest) => Promise<void> | void;

export interface AdminRoute {
  method: string;
  /**
   * The path, segment by segment: a literal is compared as sent (not decoded), `{name}` takes one
   * non-empty segment, `{name...}` (last only) takes the rest of the path, slashes included,
   * possibly nothing.
   */
  pattern: string;
  handle: AdminHandler;
  /** How a 405 on this path names this route (default: its method), e.g. `POST /admin/reload`. */
  hint?: string;
}

/** What a 400 says of a parameter whose escapes are not valid UTF-8. */
export interface ParameterProblem {
  code: ProblemCode;
  detail: string;
}

/**
 * Asked before the path is matched; answers the request itself and returns false to stop it.
 * To let it pass: true, or the principal it authenticated, which the handler is given.
 */
export type { Guard } from "./auth.js";

export interface RouterOptions {
  routes: readonly AdminRoute[];
  guard?: Guard;
  /** Every parameter a pattern names must be here: its answer when it cannot be decoded. */
  parameters?: Readonly<Record<string, ParameterProblem>>;
  /** Where an unexpected error of a request is logged in full. */
  logger?: Pick<Logger, "error"> | undefined;
}

/** A percent-encoded path segment as text, or null when its escapes are not valid UTF-8. */
export function decodePathSegment(encoded: string): string | null {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return null;
  }
}

type Segment = { kind: "literal"; text: string } | { kind: "param" | "rest"; name: string };

/** One path pattern and the routes of each method on it. */
interface Resource {
  segments: Segment[];
  byMethod: Map<string, AdminRoute>;
  /** The 405's Allow header and detail, written once. */
  allow: string;
  useInstead: string;
}

const PARAM = /^\{(\w+)(\.\.\.)?\}$/;

function parsePattern(pattern: string, parameters: Readonly<Record<string, ParameterProblem>>): Segment[] {
  const fail = (why: string) => new Error(`admin route ${pattern}: ${why}`);
  if (!pattern.startsWith("/")) throw fail("a pattern starts with /");
  // Split as a request path is: the leading "" keeps the two aligned.
  const parts = pattern.split("/");
  const seen = new Set<string>();
  return parts.map((part, i): Segment => {
    const m = PARAM.exec(part);
    if (!m) {
      if (part.includes("{") || part.includes("}")) throw fail(`"${part}" is neither a literal nor {name}`);
      return { kind: "literal", text: part };
    }
    const name = m[1]!;
    if (seen.has(name)) throw fail(`{${name}} appears twice`);
    seen.add(name);
    if (!Object.hasOwn(parameters, name)) throw fail(`{${name}} has no entry in parameters`);
    if (m[2] === undefined) return { kind: "param", name };
    if (i !== parts.length - 1) throw fail(`{${name}...} must be the last segment`);
    return { kind: "rest", name };
  });
}

function compile(options: RouterOptions): Resource[] {
  const byPattern = new Map<string, Resource>();
  for (const route of options.routes) {
    let resource = byPattern.get(route.pattern);
    if (!resource) {
      const segments = parsePattern(route.pattern, options.parameters ?? {});
      resource = { segments, byMethod: new Map(), allow: "", useInstead: "" };
      byPattern.set(route.pattern, resource);
    }
    if (resource.byMethod.has(route.method))
      throw new Error(`admin route ${route.method} ${route.pattern} twice`);
    resource.byMethod.set(route.method, route);
  }
  for (const resource of byPattern.values()) {
    const routes = [...resource.byMethod.values()];
    resource.allow = routes.map((r) => r.method).join(", ");
    resource.useInstead = `use ${routes.map((r) => r.hint ?? r.method).join(" or ")}`;
  }
  return [...byPattern.values()];
}

/** The parameters of `parts` (a path split on "/") as sent, or null when `segments` do not match. */
function match(segments: readonly Segment[], parts: readonly string[]): Map<string, string> | null {
  const last = segments[segments.length - 1];
  const takesRest = last?.kind === "rest";
  if (takesRest ? parts.length < segments.length : parts.length !== segments.length) return null;
  const raw = new Map<string, string>();
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]!;
    const part = parts[i]!;
    if (segment.kind === "literal") {
      if (part !== segment.text) return null;
    } else if (segment.kind === "param") {
      if (part === "") return null;
      raw.set(segment.name, part);
    } else {
      raw.set(segment.name, parts.slice(i).join("/"));
    }
  }
  return raw;
}

/** A node:http handler answering the table's routes; it never rejects. */
export function createRouter(
  options: RouterOptions,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const resources = compile(options);
  const parameters = options.parameters ?? {};
  const { guard, logger } = options;

  async function dispatch(req: IncomingMessage, res: ServerResponse, url: string, path: string) {
    const passed = guard ? guard(req, res) : true;
    if (passed === false) return;
    const principal = passed === true ? undefined : passed;
    const parts = path.split("/");
    let resource: Resource | undefined;
    let raw: Map<string, string> | null = null;
    // The first pattern that matches, in table order.
    for (const candidate of resources) {
      raw = match(candidate.segments, parts);
      if (raw) {
        resource = candidate;
        break;
      }
    }
    if (!resource || !raw) {
      replyProblem(res, "no_endpoint", `no admin endpoint ${path}`);
      return;
    }
    const params: Record<string, string> = {};
    for (const [name, encoded] of raw) {
      const decoded = decodePathSegment(encoded);
      if (decoded === null) {
        const problem = parameters[name]!;
        replyProblem(res, problem.code, problem.detail);
        return;
      }
      params[name] = decoded;
    }
    const route = resource.byMethod.get(req.method ?? "");
    if (!route) {
      replyProblem(res, "method_not_allowed", resource.useInstead, undefined, { allow: resource.allow });
      return;
    }
    const q = url.indexOf("?");
    const query = new URLSearchParams(q === -1 ? "" : url.slice(q + 1));
    await route.handle({ req, res, params, query, principal });
  }

  return async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? "/";
    const path = requestPath(url);
    try {
      await dispatch(req, res, url, path);
    } catch (err) {
      if (res.headersSent) res.destroy();
      // A problem the endpoint met (the store down, say): not the gateway's fault, and the
      // detail says what to fix.
      else if (err instanceof ProblemError) replyProblem(res, err.code, err.message);
      else {
        // The error's own words may name files, keys or internals: they go to the log, and the
        // answer only says which log line to read.
        const requestId = requestIdOf(req.headers);
        logger?.error({ err, path, request_id: requestId }, "admin request failed");
        replyProblem(
          res,
          "internal_error",
          `the admin API failed to handle this request; see the gateway's log for request_id ${requestId}`,
          undefined,
          { "x-request-id": requestId },
        );
      }
    }
  };
}

/** The path of a request target: everything before the first `?`, as sent. */
export function requestPath(url: string): string {
  const q = url.indexOf("?");
  return q === -1 ? url : url.slice(0, q);
}
