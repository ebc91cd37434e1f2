// The id a request is known by in logs, upstream (X-Request-Id) and the answer: the client's
// own when it is a plain token, otherwise a fresh UUID. A client's id is never trusted beyond
// its shape: it reaches log lines and headers, so nothing that could break either gets in.
import { randomUUID } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";

const REQUEST_ID = /^[A-Za-z0-9._\-:]{1,128}$/;

export function requestIdOf(headers: IncomingHttpHeaders): string {
  const incoming = headers["x-request-id"];
  return typeof incoming === "string" && REQUEST_ID.test(incoming) ? incoming : randomUUID();
}
