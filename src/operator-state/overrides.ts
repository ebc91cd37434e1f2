// Runtime overrides (PUT /admin/overrides/{caller}/{limit}): where they are kept, and how every
// instance's in-process table (override-table.ts) stays current.
//
// Redis layout, under the store's prefix and the `{rt}` hash tag of all runtime state:
// - `<prefix>{rt}:ovr:<caller>`: a hash, limit name → JSON record (encodeRecord), expiring after
//   its latest override (plus KEY_SLACK_MS: instances decide expiry by their own clocks);
// - `<prefix>{rt}:ovr-index`: the set of callers with a hash, so a start reads the overrides
//   without walking a keyspace that may hold 100,000 runtime keys.
// A write is one MULTI (changes.ts publishWith): lua/override_write.lua, which also drops the
// caller's expired fields and keeps the expiry and the index exact, and the change's record. So a
// write and its change cannot part: every instance hears of it by pub/sub at once, or by the
// change stream's reconcile within RECONCILE_INTERVAL_MS.
//
// Each instance keeps the table current: everything is read at start (the index, a bounded SSCAN,
// then one HGETALL per caller), a change re-reads its caller, and a reset (changes may have been
// missed: the stream was trimmed past us, Redis restarted empty) reads everything again. Expiry
// needs no message: the table checks the clock at use.
//
// `memory://` keeps overrides in this process only, its feed delivering to this process.

import { readFileSync } from "node:fs";
import type { Cluster, Redis } from "ioredis";
import { ALGORITHM_NAMES, type AlgorithmName } from "../limits/algorithms/index.js";
import { Boundary } from "../limits/stores/redis/boundary.js";
import { LUA_DIR } from "../limits/stores/redis/scripts.js";
import { type ChangeFeed, RECONCILE_INTERVAL_MS, type RedisChangeFeed } from "./changes.js";
import type { OverrideRecord } from "./override-rules.js";
import { OVERRIDES_MAX, OverrideTable } from "./override-table.js";
import { storedObject } from "./stored-json.js";

/** The caller's overrides: limit name → record. */
export type CallerRecords = Map<string, OverrideRecord>;

export interface OverrideStore {
  /**
   * Sets (`record`) or removes (undefined) one override and records the change for every
   * instance. Resolves whether an override in force was there before.
   */
  write(caller: string, limit: string, record: OverrideRecord | undefined): Promise<boolean>;
  /** One caller's overrides in force. */
  read(caller: string): Promise<CallerRecords>;
  /** Every caller's, at most OVERRIDES_MAX overrides; `complete` false when more were left. */
  readAll(): Promise<{ all: Map<string, CallerRecords>; complete: boolean }>;
}

/** Added to the key's expiry past its latest override: the gateways' clocks decide, not Redis's. */
export const KEY_SLACK_MS = 60_000;

/** Index members one SSCAN step asks for, and HGETALLs sent in one pipeline. */
const LOAD_PAGE = 500;

export function overrideKey(prefix: string, caller: string): string {
  return `${prefix}{rt}:ovr:${caller}`;
}

export function overrideIndexKey(prefix: string): string {
  return `${prefix}{rt}:ovr-index`;
}

/** A record as stored: expires_at and set_at in epoch ms (the script reads expires_at). */
export function encodeRecord(record: OverrideRecord): string {
  return JSON.stringify({
    algorithm: record.algorithm,
    sizes: record.sizes,
    reason: record.reason,
    expires_at: record.expiresAtMs,
    set_at: record.setAtMs,
  });
}

/** A stored record, or undefined for text this version cannot read (never trusted blindly). */
export function decodeRecord(text: string): OverrideRecord | undefined {
  const o = storedObject(text);
  if (!o) return undefined;
  const { algorithm, sizes, reason, expires_at, set_at } = o;
  if (
    typeof algorithm !== "string" ||
    !(ALGORITHM_NAMES as readonly string[]).includes(algorithm) ||
    typeof sizes !== "object" ||
    sizes === null ||
    Array.isArray(sizes) ||
    typeof reason !== "string" ||
    typeof expires_at !== "number" ||
    typeof set_at !== "number"
  )
    return undefined;
  return {
    algorithm: algorithm as AlgorithmName,
    sizes: sizes as Record<string, unknown>,
    reason,
    expiresAtMs: expires_at,
    setAtMs: set_at,
  };
}

function recordsOf(fields: Record<string, string>, nowMs: number): CallerRecords {
  const records: CallerRecords = new Map();
  for (const [limit, text] of Object.entries(fields)) {
    const record = decodeRecord(text);
    if (record && record.expiresAtMs > nowMs) records.set(limit, record);
  }
  return records;
}

const WRITE_SCRIPT = readFileSync(`${LUA_DIR}override_write.lua`, "utf8");

export interface RedisOverrideStoreOptions {
  client: Redis | Cluster;
  prefix: string;
  /** Each call's deadline (store.timeout). */
  timeoutMs: number;
  feed: Pick<RedisChangeFeed, "publishWith">;
  now?: () => number;
}

export class RedisOverrideStore implements OverrideStore {
  private readonly client: Redis | Cluster;
  private readonly prefix: string;
  private readonly boundary: Boundary;
  private readonly feed: Pick<RedisChangeFeed, "publishWith">;
  private readonly now: () => number;

  constructor(options: RedisOverrideStoreOptions) {
    this.client = options.client;
    this.prefix = options.prefix;
    this.boundary = new Boundary(options.timeoutMs);
    this.feed = options.feed;
    this.now = options.now ?? Date.now;
  }

  async write(caller: string, limit: string, record: OverrideRecord | undefined): Promise<boolean> {
    const [existed] = await this.boundary.bounded(
      this.feed.publishWith({ kind: "override", caller }, [
        this.script(caller, limit, record ? encodeRecord(record) : ""),
      ]),
    );
    return existed === 1;
  }

  async read(caller: string): Promise<CallerRecords> {
    const fields = await this.boundary.bounded(this.client.hgetall(overrideKey(this.prefix, caller)));
    return recordsOf(fields, this.now());
  }

  async readAll(): Promise<{ all: Map<string, CallerRecords>; complete: boolean }> {
    const index = overrideIndexKey(this.prefix);
    const all = new Map<string, CallerRecords>();
    let held = 0;
    let cursor = "0";
    do {
      const [next, members] = await this.boundary.bounded(
        this.client.sscan(index, cursor, "COUNT", LOAD_PAGE),
      );
      cursor = next;
      // SSCAN may return a member twice: read each once.
      const callers = [...new Set(members)].filter((c) => !all.has(c));
      if (callers.length === 0) continue;
      const pipeline = this.client.pipeline();
      for (const caller of callers) pipeline.hgetall(overrideKey(this.prefix, caller));
      const replies = (await this.boundary.bounded(pipeline.exec())) ?? [];
      const now = this.now();
      for (let i = 0; i < callers.length; i++) {
        const [err, fields] = replies[i] ?? [new Error("no reply")];
        if (err) throw this.boundary.toStoreError(err);
        const records = recordsOf(fields as Record<string, string>, now);
        if (records.size === 0) {
          // Its hash expired with its last override: the index lets go of it too.
          const [, script, keys, ...args] = this.script(callers[i]!, "", "");
          await this.boundary.bounded(this.client.eval(script, keys, ...args));
          continue;
        }
        if (held + records.size > OVERRIDES_MAX) return { all, complete: false };
        all.set(callers[i]!, records);
        held += records.size;
      }
    } while (cursor !== "0");
    return { all, complete: true };
  }

  private script(caller: string, limit: string, text: string): ["eval", string, number, ...string[]] {
    return [
      "eval",
      WRITE_SCRIPT,
      2,
      overrideKey(this.prefix, caller),
      overrideIndexKey(this.prefix),
      caller,
      limit,
      text,
      String(this.now()),
      String(KEY_SLACK_MS),
    ];
  }
}

/** `memory://`: this process's overrides, its in-process feed telling this process's table. */
export class MemoryOverrideStore implements OverrideStore {
  private readonly callers = new Map<string, CallerRecords>();
  private readonly now: () => number;

  constructor(
    private readonly feed: Pick<ChangeFeed, "publish">,
    options: { now?: () => number } = {},
  ) {
    this.now = options.now ?? Date.now;
  }

  async write(caller: string, limit: string, record: OverrideRecord | undefined): Promise<boolean> {
    const now = this.now();
    const records = this.callers.get(caller) ?? new Map<string, OverrideRecord>();
    const before = records.get(limit);
    if (record) records.set(limit, record);
    else records.delete(limit);
    for (const [name, r] of records) if (r.expiresAtMs <= now) records.delete(name);
    if (records.size > 0) this.callers.set(caller, records);
    else this.callers.delete(caller);
    await this.feed.publish({ kind: "override", caller });
    return before !== undefined && before.expiresAtMs > now;
  }

  async read(caller: string): Promise<CallerRecords> {
    const now = this.now();
    const records: CallerRecords = new Map();
    for (const [name, r] of this.callers.get(caller) ?? []) if (r.expiresAtMs > now) records.set(name, r);
    return records;
  }

  async readAll(): Promise<{ all: Map<string, CallerRecords>; complete: boolean }> {
    const all = new Map<string, CallerRecords>();
    for (const caller of this.callers.keys()) {
      const records = await this.read(caller);
      if (records.size > 0) all.set(caller, records);
    }
    return { all, complete: true };
  }
}

/** How the gateway picks the store: the same choice as the change feed's (changes.ts). */
export type OverrideStoreKind =
  | { kind: "memory"; feed: Pick<ChangeFeed, "publish"> }
  | {
      kind: "redis";
      client: Redis | Cluster;
      prefix: string;
      timeoutMs: number;
      feed: Pick<RedisChangeFeed, "publishWith">;
    };

export function createOverrideStore(store: OverrideStoreKind, now?: () => number): OverrideStore {
  return store.kind === "memory"
    ? new MemoryOverrideStore(store.feed, { now })
    : new RedisOverrideStore({ ...store, now });
}

/** Every so often expired overrides of callers that stopped calling leave the table. */
const SWEEP_INTERVAL_MS = 60_000;

export interface OverridesOptions {
  store: OverrideStore;
  feed: Pick<ChangeFeed, "onChange" | "onReset">;
  now?: () => number;
  /** A failed read of the store (retried), or overrides left unloaded past OVERRIDES_MAX. */
  onError?: (err: Error) => void;
  /** How soon a failed load is tried again (default RECONCILE_INTERVAL_MS). */
  retryMs?: number;
}

/**
 * The overrides of this instance: the store, and the table the limiter reads, kept current from
 * the change feed. Writes go to the store and then into this instance's table before they are
 * answered, so the operator's next request here already sees them.
 */
export class Overrides {
  readonly table: OverrideTable;
  private readonly store: OverrideStore;
  private readonly onError: (err: Error) => void;
  private readonly retryMs: number;
  /** The latest refresh started per caller: an older one finishing later must not win. */
  private readonly refreshing = new Map<string, number>();
  private sequence = 0;
  /** While a full load runs: the callers changed meanwhile, read again once it is in. */
  private changedDuringLoad: Set<string> | undefined;
  private loading: Promise<void> | undefined;
  private loadAgain = false;
  private retry: NodeJS.Timeout | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(options: OverridesOptions) {
    this.store = options.store;
    this.table = new OverrideTable({ now: options.now });
    this.onError = options.onError ?? (() => {});
    this.retryMs = options.retryMs ?? RECONCILE_INTERVAL_MS;
    options.feed.onChange((change) => {
      if (change.kind === "override") void this.refresh(change.caller);
    });
    options.feed.onReset(() => void this.load());
  }

  /** Loads every override (retried until the store answers) and starts the sweep. */
  start(): Promise<void> {
    this.sweeper ??= setInterval(() => this.table.sweep(), SWEEP_INTERVAL_MS).unref();
    return this.load();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retry);
    clearInterval(this.sweeper);
  }

  /** Sets one override; resolves whether it replaced one in force. */
  async set(caller: string, limit: string, record: OverrideRecord): Promise<boolean> {
    const replaced = await this.store.write(caller, limit, record);
    await this.refresh(caller);
    return replaced;
  }

  /** Removes one override; resolves whether there was one in force. */
  async remove(caller: string, limit: string): Promise<boolean> {
    const removed = await this.store.write(caller, limit, undefined);
    await this.refresh(caller);
    return removed;
  }

  /** One caller's overrides as the store holds them (the truth, whatever this table has heard). */
  read(caller: string): Promise<CallerRecords> {
    return this.store.read(caller);
  }

  /** Reads one caller again; the latest read started wins. */
  async refresh(caller: string): Promise<void> {
    const mine = ++this.sequence;
    this.refreshing.set(caller, mine);
    this.changedDuringLoad?.add(caller);
    try {
      const records = await this.store.read(caller);
      if (this.refreshing.get(caller) === mine) this.table.setCaller(caller, records);
    } catch (err) {
      // The caller's table entry stays as it was; the next change or the load after a reset
      // corrects it.
      this.report(err);
    } finally {
      if (this.refreshing.get(caller) === mine) this.refreshing.delete(caller);
    }
  }

  /** Reads everything again (one load at a time; a reset during one asks for another after it). */
  load(): Promise<void> {
    if (this.loading) {
      this.loadAgain = true;
      return this.loading;
    }
    this.loading = this.loadOnce().finally(() => {
      this.loading = undefined;
      if (this.loadAgain && !this.stopped) {
        this.loadAgain = false;
        void this.load();
      }
    });
    return this.loading;
  }

  private async loadOnce(): Promise<void> {
    clearTimeout(this.retry);
    const changed = new Set<string>();
    this.changedDuringLoad = changed;
    try {
      const { all, complete } = await this.store.readAll();
      this.table.replaceAll(all);
      if (!complete)
        this.report(
          new Error(
            `more than ${OVERRIDES_MAX} overrides are stored; this instance applies the first ${OVERRIDES_MAX} it read`,
          ),
        );
    } catch (err) {
      this.report(err);
      if (!this.stopped) this.retry = setTimeout(() => void this.load(), this.retryMs).unref();
      return;
    } finally {
      this.changedDuringLoad = undefined;
    }
    // Changes heard while the load read: what it read of them may be older.
    await Promise.all([...changed].map((caller) => this.refresh(caller)));
  }

  private report(err: unknown): void {
    if (this.stopped) return;
    this.onError(err instanceof Error ? err : new Error(String(err)));
  }
}
