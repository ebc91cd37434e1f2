// The JSON object an operator's POST or PUT sends, read whole but bounded: an admin body is a
// few hundred bytes, so anything past JSON_BODY_MAX is refused (413 body-too-large) before it is
// buffered further, and the answer reaches the client still sending it (the connection closes
// after it). Every other refusal is a
// ProblemError with the caller's own 400 code and a detail naming the fix.
// A member named twice in one object is refused too: JSON.parse keeps the last silently, so
// `{"plan": "free", "plan": "pro"}` would issue a pro key to an operator who read "free" first.
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
  const declared = Number(req.headers["content-length"]);
  if (declared > JSON_BODY_MAX) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  const overflow = await new Promise<boolean>((resolve, reject) => {
    const onData = (buf: Buffer) => {
      size += buf.length;
      if (size <= JSON_BODY_MAX) {
        chunks.push(buf);
        return;
      }
      // The rest is not wanted. Not destroyed: that reset the connection before the answer
      // was written (a `for await` over the body destroys it when left early), and the client
      // saw no answer at all. The admin server closes the connection after the 413
      // (answeredBeforeBody), which the client reads before the FIN.
      cleanup();
      chunks.length = 0;
      req.pause();
      resolve(true);
    };
    const onEnd = () => {
      cleanup();
      resolve(false);
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const cleanup = () => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
  });
  if (overflow) throw tooLarge();
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
  const twice = duplicateMember(text);
  if (twice !== undefined)
    throw new ProblemError(
      code,
      `member "${twice}" appears more than once in the request body: JSON keeps only the last; send it once`,
    );
  return value as Record<string, unknown>;
}

function tooLarge(): ProblemError {
  return new ProblemError(
    "body_too_large",
    `the request body is larger than ${JSON_BODY_MAX} bytes (an admin request is a small JSON object); send less`,
  );
}

const JSON_SPACE = new Set([" ", "\t", "\n", "\r"]);

/**
 * The first member name an object of `text` repeats, as a path from the top (`plan`,
 * `limits.global.rate`, `items[1].name`); undefined: none. `text` is JSON that parsed, so a
 * string followed by `:` inside an object is a member name, and brackets outside strings nest.
 * One pass over the bounded body.
 */
export function duplicateMember(text: string): string | undefined {
  const stack: { names: Set<string> | undefined; path: string; last: string; index: number }[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    const top = stack[stack.length - 1];
    if (c === '"') {
      let end = i + 1;
      while (text[end] !== '"') end += text[end] === "\\" ? 2 : 1;
      let next = end + 1;
      while (JSON_SPACE.has(text[next] ?? "")) next++;
      if (top?.names && text[next] === ":") {
        const name = JSON.parse(text.slice(i, end + 1)) as string;
        const at = top.path === "" ? name : `${top.path}.${name}`;
        if (top.names.has(name)) return at;
        top.names.add(name);
        top.last = at;
      }
      i = end;
    } else if (c === "{" || c === "[") {
      const path = top === undefined ? "" : top.names ? top.last : `${top.path}[${top.index}]`;
      stack.push({ names: c === "{" ? new Set() : undefined, path, last: "", index: 0 });
    } else if (c === "}" || c === "]") stack.pop();
    else if (c === "," && top && !top.names) top.index++;
  }
  return undefined;
}
