// The Lua scripts as client commands: the narrow slice of the client the limit calls use.
//
// defineCommand runs EVALSHA and falls back to EVAL on NOSCRIPT (a restarted or failed-over
// Redis, or a cluster node that never ran it, has an empty script cache), so each script is
// loaded once per server, not per call. In a cluster ioredis sends it to the node owning the
// first key and follows MOVED/ASK.
import type { Cluster, Redis } from "ioredis";
import { CHECK_COMMAND } from "./connection.js";
import { CHARGE_SCRIPT, CHECK_SCRIPT, PEEK_SCRIPT, REFUND_SCRIPT, RENEW_SCRIPT, sha1 } from "./scripts.js";

/** One script call: the number of KEYS, then KEYS and ARGV. Rejects with the client's error. */
export type ScriptCommand = (numKeys: number, ...args: (string | number)[]) => Promise<unknown>;

/** store.replicas: how many replicas must hold a check's writes, and how long it waits for them. */
export interface ReplicaWait {
  wait: number;
  timeoutMs: number;
}

/** check.lua's reply, and how many replicas held its writes when store.replicas asks (else undefined). */
export interface CheckResult {
  reply: unknown;
  acknowledged: number | undefined;
}

export type CheckCommand = (numKeys: number, ...args: (string | number)[]) => Promise<CheckResult>;

export interface ScriptCommands {
  check: CheckCommand;
  charge: ScriptCommand;
  peek: ScriptCommand;
  renew: ScriptCommand;
  refund: ScriptCommand;
}

export function defineScripts(client: Redis | Cluster, replicas?: ReplicaWait): ScriptCommands {
  const define = (name: string, lua: string): ScriptCommand => {
    client.defineCommand(name, { lua });
    return (client as unknown as Record<string, ScriptCommand>)[name]!.bind(client);
  };
  const check = define(CHECK_COMMAND, CHECK_SCRIPT);
  return {
    check: replicas
      ? checkThenWait(client, replicas)
      : (numKeys, ...args) => check(numKeys, ...args).then((reply) => ({ reply, acknowledged: undefined })),
    peek: define("tollgatePeek", PEEK_SCRIPT),
    charge: define("tollgateCharge", CHARGE_SCRIPT),
    renew: define("tollgateRenew", RENEW_SCRIPT),
    refund: define("tollgateRefund", REFUND_SCRIPT),
  };
}

const CHECK_SHA = sha1(CHECK_SCRIPT);

/**
 * check.lua, then `WAIT wait timeout`, written together (one pipeline: one write, one round trip
 * plus the replicas' acknowledgement). WAIT answers how many replicas hold every write this
 * connection made so far, the script's among them.
 *
 * The script is sent as EVALSHA by hand rather than as the defined command: that one resends
 * itself as EVAL after NOSCRIPT, which would run it after the WAIT already answered, so the WAIT
 * would vouch for nothing. A NOSCRIPT here ran nothing; the pair is sent again with the script's
 * text (which loads it for the next calls).
 */
function checkThenWait(client: Redis | Cluster, replicas: ReplicaWait): CheckCommand {
  const run = async (script: "evalsha" | "eval", numKeys: number, args: (string | number)[]) => {
    const results = await client
      .pipeline([
        [script, script === "evalsha" ? CHECK_SHA : CHECK_SCRIPT, numKeys, ...args],
        ["wait", replicas.wait, replicas.timeoutMs],
      ])
      .exec();
    const [scriptResult, waitResult] = results ?? [];
    if (!scriptResult || !waitResult) throw new Error("Connection is closed.");
    return {
      scriptError: scriptResult[0],
      reply: scriptResult[1],
      waitError: waitResult[0],
      count: waitResult[1],
    };
  };
  return async (numKeys, ...args) => {
    let result = await run("evalsha", numKeys, args);
    // In a cluster after a failover the slot map still names the old master, which answers
    // MOVED to the script and an error of its own to the WAIT (a replica refuses it). ioredis
    // follows a pipeline's MOVED only when every command got the same one, so it followed
    // neither and never learned the new map: every later batch went to the old master
    // (test/e2e/cluster-failover.test.ts, the wait gateway never back). MOVED ran nothing:
    // the map is refreshed and the pair sent again, once.
    if (result.scriptError && /^MOVED /.test(result.scriptError.message) && "refreshSlotsCache" in client) {
      await new Promise<void>((resolve) => client.refreshSlotsCache(() => resolve()));
      result = await run("evalsha", numKeys, args);
    }
    if (result.scriptError && /NOSCRIPT/.test(result.scriptError.message))
      result = await run("eval", numKeys, args);
    if (result.scriptError) throw result.scriptError;
    if (result.waitError) throw result.waitError;
    return { reply: result.reply, acknowledged: Number(result.count) };
  };
}
