// Files the config names (the config itself, the JWT key file, TLS certificates and keys, CA
// bundles), read the one way: an unreadable file is a message naming it and why, never a throw.
import { readFileSync } from "node:fs";

/** Why a read failed, in an operator's words: "no such file", "permission denied", else the code. */
export function whyUnreadable(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code === "ENOENT" ? "no such file" : code === "EACCES" ? "permission denied" : String(code ?? err);
}

/** The file's text, or `cannot read <path>: <why>`. */
export function readText(path: string): { ok: true; text: string } | { ok: false; message: string } {
  try {
    return { ok: true, text: readFileSync(path, "utf8") };
  } catch (err) {
    return { ok: false, message: `cannot read ${path}: ${whyUnreadable(err)}` };
  }
}
