// The Lua scripts as client commands: the narrow slice of the client the limit calls use.
//
// defineCommand runs EVALSHA and falls back to EVAL on NOSCRIPT (a restarted or failed-over
// Redis, or a cluster node that never ran it, has an empty script cache), so each script is
// loaded once per server, not per call. In a cluster ioredis sends it to the node owning the
// first key and follows MOVED/ASK.
import type { Cluster, Redis } from "ioredis";
import { CHECK_COMMAND } from "./connection.js";
import { CHARGE_SCRIPT, CHECK_SCRIPT, PEEK_SCRIPT, REFUND_SCRIPT, RENEW_SCRIPT } from "./scripts.js";

/** One script call: the number of KEYS, then KEYS and ARGV. Rejects with the client's error. */
export type ScriptCommand = (numKeys: number, ...args: (string | number)[]) => Promise<unknown>;

export interface ScriptCommands {
  check: ScriptCommand;
  charge: ScriptCommand;
  peek: ScriptCommand;
  renew: ScriptCommand;
  refund: ScriptCommand;
}

export function defineScripts(client: Redis | Cluster): ScriptCommands {
  const define = (name: string, lua: string): ScriptCommand => {
    client.defineCommand(name, { lua });
    return (client as unknown as Record<string, ScriptCommand>)[name]!.bind(client);
  };
  return {
    check: define(CHECK_COMMAND, CHECK_SCRIPT),
    peek: define("tollgatePeek", PEEK_SCRIPT),
    charge: define("tollgateCharge", CHARGE_SCRIPT),
    renew: define("tollgateRenew", RENEW_SCRIPT),
    refund: define("tollgateRefund", REFUND_SCRIPT),
  };
}
