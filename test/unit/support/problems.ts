// One assertion for a problem+json answer, shared by the tests of every endpoint that answers one.
import { expect } from "vitest";
import { PROBLEMS, type ProblemCode } from "../../../src/http/problem.js";

interface Answer {
  statusCode: number;
  headers: Record<string, unknown>;
  json(): Record<string, unknown>;
}

/**
 * `res` is the problem `code` (its status, media type, type URI and title), with `detail` when
 * given. `exact`: the body holds nothing else (no extension members).
 */
export function expectProblem(res: Answer, code: ProblemCode, detail?: string, exact = false): void {
  const entry = PROBLEMS[code];
  expect(res.statusCode).toBe(entry.status);
  expect(res.headers["content-type"]).toBe("application/problem+json");
  const body = res.json();
  const expected = {
    type: entry.type,
    title: entry.title,
    status: entry.status,
    ...(detail === undefined ? {} : { detail }),
  };
  if (exact) expect(body).toEqual(expected);
  else expect(body).toMatchObject(expected);
}
