// The JSON object an operator's POST or PUT sends, read whole but bounded: an admin body is a
// few hundred bytes, so anything past JSON_BODY_MAX is refused before it is buffered further.
// Every refusal is a ProblemError with the caller's own 400 code and a detail naming the fix.
import type { IncomingMessage } from "node:http";
import type { ProblemCode } from "../http/problem.js";
import { ProblemError } from "./reply.js";

/** The largest admin request body read, in bytes. */
export const JSON_BODY_MAX = 64 * 1024;

/**
 * The body as a JSON object; an empty body is `{}` (every member then takes its default). A body
 * that is not JSON, not an object, or too large is a ProblemError(`code`).
 */
export async function readJsonObject(
  req: IncomingMessage,
  code: ProblemCode,
): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > JSON_BODY_MAX) {
      // Stop reading: the rest is not wanted, and the answer closes the connection.
      req.destroy();
      throw new ProblemError(
        code,
        `the request body is larger than ${JSON_BODY_MAX} bytes; send a JSON object`,
      );
    }
    chunks.push(buf);
  }
  const text = Buffer.concat(chunks).toString("utf8").trim();
  if (text === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ProblemError(
      code,
      `the request body is not JSON (${(err as Error).message}); send a JSON object`,
    );
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new ProblemError(code, "the request body must be a JSON object");
  return value as Record<string, unknown>;
}
