// The hooks import-log.mjs registers (they run on Node's loader thread): each resolved URL is
// appended, one a line, to the log file. Static and dynamic imports both pass through here.
import { appendFileSync } from "node:fs";

let file;

export function initialize(data) {
  file = data.file;
}

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(file, `${resolved.url}\n`);
  return resolved;
}
