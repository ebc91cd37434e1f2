// /admin/ui/: the operator's console, served by the admin listener (only where the admin API is
// on). Its files ship in the package (console/ beside dist/), read once; nothing is built at
// install and nothing is fetched from elsewhere. The page signs in with an admin token posted
// once to /admin/ui/session, which answers with an HttpOnly session cookie and the session's
// CSRF token; from then on the page calls the admin API itself with the cookie (sessions.ts,
// auth.ts). Every answer here carries a Content-Security-Policy that allows only this origin's
// own script and style: no inline script, no eval, no framing.
import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { TLSSocket } from "node:tls";
import type { AdminToken } from "../../config/admin-tokens.js";
import { matchingToken } from "../auth.js";
import { readJsonObject } from "../json-body.js";
import { ProblemError, replyProblem, sendJson } from "../reply.js";
import { type ConsoleSessions, CSRF_HEADER, sessionCookie, sessionIdOf } from "./sessions.js";

export const CONSOLE_PATH = "/admin/ui";

/** The console's security headers, on its files and its session answers alike. */
export const CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
};

const FILES: Readonly<Record<string, string>> = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "style.css": "text/css; charset=utf-8",
};

/** console/ at the package's root: two levels above this module in src/ and in dist/ alike. */
const ROOT = new URL("../../../console/", import.meta.url);

let files: Map<string, Buffer> | undefined;
function file(name: string): Buffer | undefined {
  files ??= new Map(Object.keys(FILES).map((f) => [f, readFileSync(new URL(f, ROOT))]));
  return files.get(name);
}

export interface ConsoleDeps {
  tokens: () => readonly AdminToken[];
  sessions: ConsoleSessions;
}

function send(
  res: ServerResponse,
  status: number,
  type: string,
  body: Buffer | string,
  method?: string,
): void {
  res.writeHead(status, {
    ...CONSOLE_HEADERS,
    "content-type": type,
    "content-length": Buffer.byteLength(body),
  });
  res.end(method === "HEAD" ? undefined : body);
}

/** Whether the admin listener this request came in on is TLS: the cookie is then Secure. */
const overTls = (req: IncomingMessage) => (req.socket as Partial<TLSSocket>).encrypted === true;

/** Answers a request under /admin/ui; the admin API is on (a token is configured). */
export async function serveConsole(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  deps: ConsoleDeps,
): Promise<void> {
  for (const [name, value] of Object.entries(CONSOLE_HEADERS)) res.setHeader(name, value);
  if (path === `${CONSOLE_PATH}/session`) return session(req, res, deps);
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.setHeader("allow", "GET, HEAD");
    replyProblem(res, "method_not_allowed", "the console's files are read with GET");
    return;
  }
  const name =
    path === CONSOLE_PATH || path === `${CONSOLE_PATH}/` ? "index.html" : path.slice(CONSOLE_PATH.length + 1);
  const type = Object.hasOwn(FILES, name) ? FILES[name] : undefined;
  const body = type === undefined ? undefined : file(name);
  if (type === undefined || body === undefined) {
    replyProblem(
      res,
      "no_endpoint",
      `the console has no file ${JSON.stringify(name)}: open ${CONSOLE_PATH}/`,
    );
    return;
  }
  send(res, 200, type, body, req.method);
}

/**
 * POST signs in ({ "token": "…" } as JSON: a form of another site cannot send that without a
 * preflight this listener never answers), GET tells the page who it is and its CSRF token,
 * DELETE signs out (with the CSRF token).
 */
async function session(req: IncomingMessage, res: ServerResponse, deps: ConsoleDeps): Promise<void> {
  const tokens = deps.tokens();
  const id = sessionIdOf(req.headers.cookie);
  if (req.method === "POST") {
    if (!/^application\/json\b/i.test(req.headers["content-type"] ?? "")) {
      replyProblem(
        res,
        "bad_request",
        'sign in with a JSON body, { "token": "<admin token>" }, as application/json',
      );
      return;
    }
    let body: Record<string, unknown>;
    try {
      body = await readJsonObject(req, "bad_request");
    } catch (err) {
      if (err instanceof ProblemError) {
        replyProblem(res, err.code, err.message);
        return;
      }
      throw err;
    }
    const token = typeof body.token === "string" ? matchingToken(body.token, tokens) : undefined;
    if (!token) {
      replyProblem(res, "unauthorized", "that is not one of this gateway's admin tokens (admin.tokens)");
      return;
    }
    if (id !== undefined) deps.sessions.close(id);
    const opened = deps.sessions.open(token);
    res.setHeader("set-cookie", sessionCookie(opened.id, overTls(req)));
    sendJson(res, 200, { name: opened.principal.name, scope: opened.principal.scope, csrf: opened.csrf });
    return;
  }
  if (req.method === "GET" || req.method === "HEAD") {
    const access = deps.sessions.access(id, "GET", undefined, tokens);
    if (access.kind !== "allowed") {
      replyProblem(res, "unauthorized", "not signed in: sign in with an admin token");
      return;
    }
    sendJson(res, 200, { name: access.principal.name, scope: access.principal.scope, csrf: access.csrf });
    return;
  }
  if (req.method === "DELETE") {
    const csrf = req.headers[CSRF_HEADER];
    const access = deps.sessions.access(id, "DELETE", typeof csrf === "string" ? csrf : undefined, tokens);
    if (access.kind === "bad-csrf") {
      replyProblem(res, "bad_csrf", `signing out needs the session's CSRF token in ${CSRF_HEADER}`);
      return;
    }
    if (id !== undefined) deps.sessions.close(id);
    res.setHeader("set-cookie", sessionCookie("", overTls(req)));
    sendJson(res, 200, { signed_out: true });
    return;
  }
  res.setHeader("allow", "GET, HEAD, POST, DELETE");
  replyProblem(res, "method_not_allowed", "sign in with POST, read with GET, sign out with DELETE");
}
