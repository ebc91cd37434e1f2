// How the admin listener answers: JSON that no cache keeps, and problems from the one table
// (http/problem.ts). An endpoint that meets a problem deep inside its work throws ProblemError,
// and the router answers it as that problem.
import type { ServerResponse } from "node:http";
import { type ProblemCode, problemFor, sendProblem } from "../http/problem.js";

/**
 * A request the admin API answers with a problem of the table rather than a 500: thrown where
 * the problem is met (a store read, say), answered by the router.
 */
export class ProblemError extends Error {
  readonly code: ProblemCode;
  constructor(code: ProblemCode, detail: string) {
    super(detail);
    this.name = "ProblemError";
    this.code = code;
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
  });
  res.end(text);
}

/** A problem from the table, with the members `extra` adds after `detail`. */
export function replyProblem(
  res: ServerResponse,
  code: ProblemCode,
  detail: string,
  extra?: Record<string, unknown>,
  headers?: Record<string, string>,
): void {
  const body = problemFor(code, detail);
  if (extra) Object.assign(body, extra);
  sendProblem(res, body, headers);
}
