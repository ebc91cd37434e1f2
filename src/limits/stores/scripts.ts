// The Redis scripts, composed from lua/: algorithm fragments first, then the entry that uses
// them. Composition keeps one copy of each algorithm; the SHA1 is what EVALSHA runs.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

// src/limits/stores and dist/limits/stores are both three levels below the package root.
export const LUA_DIR = fileURLToPath(new URL("../../../lua/", import.meta.url));

/** Fragments in the order they are concatenated; the last one is the entry point. */
const ALGORITHM_PARTS = ["token_bucket.lua", "windows.lua", "concurrency.lua", "view.lua"] as const;
export const CHECK_SCRIPT_PARTS = [...ALGORITHM_PARTS, "check.lua"] as const;

export function composeScript(parts: readonly string[]): string {
  return parts.map((name) => `-- ${name}\n${readFileSync(LUA_DIR + name, "utf8")}`).join("\n");
}

export function sha1(text: string): string {
  return createHash("sha1").update(text).digest("hex");
}

export const CHECK_SCRIPT = composeScript(CHECK_SCRIPT_PARTS);

/** The post-charge script: the same algorithm fragments, a forced debit as entry. */
export const CHARGE_SCRIPT = composeScript([...ALGORITHM_PARTS, "charge.lua"]);

/** The admin API's read: every algorithm at a cost of 0, nothing committed. */
export const PEEK_SCRIPT = composeScript([...ALGORITHM_PARTS, "peek.lua"]);

/** Extends the concurrency leases of requests still in flight. */
export const RENEW_SCRIPT = composeScript([...ALGORITHM_PARTS, "renew.lua"]);

/** Gives back what checks took when the gateway had already answered without them. */
export const REFUND_SCRIPT = composeScript([...ALGORITHM_PARTS, "refund.lua"]);
