// Denial records: the keys a denial is written under, and the queue of denials decided in this
// process (capped per caller, counted in full, written once a second, dropped when the write fails).
import { afterEach, describe, expect, it, vi } from "vitest";
import type { CompiledPlan } from "../../src/config/compile.js";
import type { Caller } from "../../src/identity/caller.js";
import { DenialRecords } from "../../src/limits/denials.js";
import { DENIAL_LOG_MAX, type DenialBatch, TOP_BUCKET_MS } from "../../src/limits/stores/contract.js";
import { DENIAL_FLUSH_MS, DenialQueue } from "../../src/limits/stores/denial-queue.js";

const plan = { name: "free", limitsByRoute: new Map(), limits: [] } as CompiledPlan;
const client: Caller = { kind: "client", id: "acme-prod", plan, tenant: "acme", ipKey: "192.0.2.1" };
const anonymous: Caller = { kind: "anonymous", plan, ipKey: "2001:db8::/64" };
const route = { name: "search", cost: 1, onFailure: "open" as const, limits: [] };

function recordingLog(fail = false) {
  const writes: DenialBatch[][] = [];
  return {
    writes,
    log: {
      recordDenials: (batch: readonly DenialBatch[]) => {
        writes.push(structuredClone([...batch]));
        return fail ? Promise.reject(new Error("down")) : Promise.resolve();
      },
    },
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("denial records", () => {
  it("name the caller's log under its hash tag and the top-list bucket of the moment", () => {
    const records = new DenialRecords("tg:");
    const at = 7 * TOP_BUCKET_MS + 1234;
    expect(records.of(client, route, at)).toEqual({
      logKey: "tg:{t:acme}:c:acme-prod:denials",
      topKey: `tg:{denials}:top:${7 * TOP_BUCKET_MS}`,
      caller: "client:acme-prod",
      route: "search",
    });
    expect(records.of(anonymous, route, at + TOP_BUCKET_MS)).toEqual({
      logKey: "tg:{ip:2001:db8::/64}:denials",
      topKey: `tg:{denials}:top:${8 * TOP_BUCKET_MS}`,
      caller: "ip:2001:db8::/64",
      route: "search",
    });
    // Back to an earlier bucket (a clock step back): the key follows the time given.
    expect(records.of(client, route, at).topKey).toBe(`tg:{denials}:top:${7 * TOP_BUCKET_MS}`);
  });
});

describe("the queue of local denials", () => {
  const record = new DenialRecords("tg:").of(client, route, 0);

  it("keeps the last DENIAL_LOG_MAX per caller, counts them all, writes once", async () => {
    vi.useFakeTimers();
    const { log, writes } = recordingLog();
    const queue = new DenialQueue(log);
    for (let i = 0; i < DENIAL_LOG_MAX + 10; i++) queue.add(record, i, ["free.search"]);
    expect(queue.size).toBe(1);
    await queue.flush();
    expect(writes).toHaveLength(1);
    const [batch] = writes[0]!;
    expect(batch).toMatchObject({ logKey: record.logKey, topKey: record.topKey, caller: "client:acme-prod" });
    expect(batch!.count).toBe(DENIAL_LOG_MAX + 10);
    expect(batch!.entries).toHaveLength(DENIAL_LOG_MAX);
    expect(batch!.entries[0]).toEqual({ atMs: 10, route: "search", limits: ["free.search"] });
    await queue.flush(); // nothing pending: nothing written
    expect(writes).toHaveLength(1);
    await queue.close();
  });

  it("flushes every DENIAL_FLUSH_MS, drops a failed write, and flushes a last time at close", async () => {
    vi.useFakeTimers();
    const { log, writes } = recordingLog(true);
    const queue = new DenialQueue(log);
    queue.add(record, 1, ["a"]);
    await vi.advanceTimersByTimeAsync(DENIAL_FLUSH_MS - 1);
    expect(writes).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(writes).toHaveLength(1);
    expect(queue.size).toBe(0); // dropped, not retried
    queue.add(record, 2, ["b"]);
    await queue.close();
    expect(writes).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(10 * DENIAL_FLUSH_MS);
    expect(writes).toHaveLength(2);
  });
});
