// The Redis scripts, composed from lua/: the prelude (the dispatch table and the clock), each
// algorithm's file as the registry names it, then the entry that uses them. Composition keeps one
// copy of each algorithm; the SHA1 is what EVALSHA runs.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { ALGORITHMS } from "../../algorithms/index.js";

// src/limits/stores/redis and dist/limits/stores/redis are both four levels below the package root.
export const LUA_DIR = fileURLToPath(new URL("../../../../lua/", import.meta.url));

/** Added to an algorithm code in check.lua's arguments: this limit is a shadow limit. */
export const SHADOW_FLAG = 16;

/**
 * Fragments in the order they are concatenated: the prelude, then each algorithm file once, in
 * registry order (a file may use one registered before it). The entry point comes last.
 */
const ALGORITHM_PARTS = [
  "prelude.lua",
  ...new Set(Object.values(ALGORITHMS).map((algorithm) => algorithm.luaFile)),
] as const;

function composeScript(parts: readonly string[]): string {
  return parts.map((name) => `-- ${name}\n${readFileSync(LUA_DIR + name, "utf8")}`).join("\n");
}

export function sha1(text: string): string {
  return createHash("sha1").update(text).digest("hex");
}

export const CHECK_SCRIPT = composeScript([...ALGORITHM_PARTS, "check.lua"]);

/** The post-charge script: the same algorithm fragments, a forced debit as entry. */
export const CHARGE_SCRIPT = composeScript([...ALGORITHM_PARTS, "charge.lua"]);

/** The admin API's read: every algorithm at a cost of 0, nothing committed. */
export const PEEK_SCRIPT = composeScript([...ALGORITHM_PARTS, "peek.lua"]);

/** Extends the concurrency leases of requests still in flight. */
export const RENEW_SCRIPT = composeScript([...ALGORITHM_PARTS, "renew.lua"]);

/** Gives back what checks took when the gateway had already answered without them. */
export const REFUND_SCRIPT = composeScript([...ALGORITHM_PARTS, "refund.lua"]);
