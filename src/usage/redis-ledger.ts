// The usage ledger in the store's Redis (layout: ledger-layout.ts). A record is one pipeline:
// per caller label (the caller, and its tenant) and per period (month, day) an HINCRBY of each
// budget's tokens and requests and a PEXPIREAT at the period's end plus the retention; the
// labels' SADD into the period's index sets, with their own PEXPIREAT. Nothing is read, so
// instances recording at once simply add up.
//
// In a Redis Cluster no command spans slots: a caller's hashes share its hash tag, the index
// sets the month's, and the pipeline is split per slot (ioredis sends a Cluster pipeline to one
// node only), sent at once: a round trip per slot touched, at most three. The index sets of a
// month are one slot written by every caller, so each instance remembers the SADDs it made for
// INDEX_MEMO_MS and skips repeating them: a busy caller costs the index node one write a minute,
// not one per request. Lost index data (a Redis restarted empty) is written again within that.
//
// Reads: HGETALL of one hash. Listing: SSCAN of the index set a page at a time, then one HGETALL
// per caller found; SSCAN walks a set of any size in bounded steps, and may return a member
// twice, which a listing drops within a page.
import calculateSlot from "cluster-key-slot";
import { Cluster, type Redis } from "ioredis";
import { parsePeriod } from "../limits/calendar.js";
import { Boundary } from "../limits/stores/redis/boundary.js";
import type { LedgerSettings, UsageBy, UsageEntry, UsageLedger, UsagePage, UsageReport } from "./ledger.js";
import {
  indexKey,
  indexOf,
  listAll,
  type RecordPeriod,
  recordable,
  recordPeriods,
  reportOf,
  requestsField,
  safely,
  TENANT_FIELD,
  tokensField,
  USAGE_PAGE_MAX,
  UsagePeriodError,
  usageKey,
  usdField,
} from "./ledger-layout.js";

/** How long an instance trusts that a caller is in a period's index set before adding it again. */
export const INDEX_MEMO_MS = 60_000;

/** Index memberships remembered at most; past it the memo starts over (a few more SADDs). */
export const INDEX_MEMO_MAX = 10_000;

/** SSCAN calls one page makes at most: a sparse set must not turn a page into a long walk. */
const SCANS_PER_PAGE = 16;

type Command = [string, ...(string | number)[]];

export interface RedisLedgerOptions {
  client: Redis | Cluster;
  /** Each call's deadline (store.timeout). */
  timeoutMs: number;
  settings: () => LedgerSettings;
  onError?: ((err: Error) => void) | undefined;
  /** Epoch ms, for the index memo only (Redis expires the keys by their own clock). */
  now?: (() => number) | undefined;
}

/** Which index memberships this instance wrote lately: `index key\nlabel` → until when it trusts it. */
export class IndexMemo {
  private readonly until = new Map<string, number>();

  constructor(
    private readonly now: () => number,
    private readonly ttlMs = INDEX_MEMO_MS,
    private readonly max = INDEX_MEMO_MAX,
  ) {}

  has(key: string, member: string): boolean {
    const at = this.until.get(`${key}\n${member}`);
    return at !== undefined && at > this.now();
  }

  /** Called only once Redis confirmed the SADD, so a failed one is sent again next time. */
  remember(key: string, member: string): void {
    if (this.until.size >= this.max) this.until.clear();
    this.until.set(`${key}\n${member}`, this.now() + this.ttlMs);
  }
}

export class RedisLedger implements UsageLedger {
  private readonly client: Redis | Cluster;
  private readonly clustered: boolean;
  private readonly boundary: Boundary;
  private readonly settings: () => LedgerSettings;
  private readonly onError: (err: Error) => void;
  private readonly memo: IndexMemo;

  constructor(options: RedisLedgerOptions) {
    this.client = options.client;
    this.clustered = options.client instanceof Cluster;
    this.boundary = new Boundary(options.timeoutMs);
    this.settings = options.settings;
    this.onError = safely(options.onError);
    this.memo = new IndexMemo(options.now ?? Date.now);
  }

  record(entry: UsageEntry): Promise<void> {
    let commands: Command[];
    let indexed: [string, string][];
    try {
      const built = this.commandsOf(entry);
      if (built === undefined) return Promise.resolve();
      ({ commands, indexed } = built);
    } catch (err) {
      // A zone the config let through that Intl refuses now, say: reported, never thrown.
      this.onError(err instanceof Error ? err : new Error(String(err)));
      return Promise.resolve();
    }
    return this.boundary.bounded(Promise.all(this.bySlot(commands).map((part) => this.exec(part)))).then(
      () => {
        for (const [key, label] of indexed) this.memo.remember(key, label);
      },
      (err: unknown) => {
        this.onError(this.boundary.toStoreError(err));
      },
    );
  }

  /** What one record sends, and the index memberships it writes; undefined: nothing to record. */
  private commandsOf(entry: UsageEntry): { commands: Command[]; indexed: [string, string][] } | undefined {
    const r = recordable(entry);
    if ("error" in r) {
      this.onError(new Error(`usage not recorded: ${r.error}`));
      return undefined;
    }
    if (r.limits.length === 0) return undefined;
    const { prefix, tz, retentionMs } = this.settings();
    const periods = recordPeriods(r.atMs, tz, retentionMs);
    const commands: Command[] = [];
    const indexed: [string, string][] = [];
    for (const label of r.labels) {
      for (const period of periods) {
        const key = usageKey(prefix, label, period.id)!;
        for (const limit of r.limits) {
          if (r.tokens > 0) commands.push(["hincrby", key, tokensField(limit), r.tokens]);
          if (r.usdMicros > 0) commands.push(["hincrby", key, usdField(limit), r.usdMicros]);
          commands.push(["hincrby", key, requestsField(limit), 1]);
        }
        const index = indexKey(prefix, indexOf(label), period.id);
        // The client's tenant rides with its index entry: written again when that is.
        if (label === r.labels[0] && r.tenant !== undefined && !this.memo.has(index, label))
          commands.push(["hset", key, TENANT_FIELD, r.tenant]);
        commands.push(["pexpireat", key, period.expiresAtMs]);
        this.index(commands, indexed, index, label, period);
      }
    }
    return { commands, indexed };
  }

  private index(
    commands: Command[],
    indexed: [string, string][],
    key: string,
    label: string,
    period: RecordPeriod,
  ): void {
    if (this.memo.has(key, label)) return;
    commands.push(["sadd", key, label], ["pexpireat", key, period.expiresAtMs]);
    indexed.push([key, label]);
  }

  /** One pipeline's commands per slot (all together on a single Redis), in their order. */
  private bySlot(commands: readonly Command[]): Command[][] {
    if (!this.clustered) return [commands as Command[]];
    const parts = new Map<number, Command[]>();
    for (const c of commands) {
      const slot = calculateSlot(String(c[1]));
      const part = parts.get(slot);
      if (part) part.push(c);
      else parts.set(slot, [c]);
    }
    return [...parts.values()];
  }

  /** Runs a pipeline; a command Redis refused (a key of another type, say) fails the whole. */
  private async exec(commands: Command[]): Promise<void> {
    const replies = await this.client.pipeline(commands).exec();
    for (const [err] of replies ?? []) if (err) throw err;
  }

  async read(caller: string, period: string): Promise<UsageReport> {
    const parsed = this.period(period);
    const key = usageKey(this.settings().prefix, caller, parsed);
    if (key === undefined) return { caller, period: parsed, limits: {} };
    const fields = await this.boundary.bounded(this.client.hgetall(key));
    return reportOf(caller, parsed, fields);
  }

  async listPage(
    period: string,
    by: UsageBy,
    page: { cursor?: string | undefined; limit: number },
  ): Promise<UsagePage> {
    const parsed = this.period(period);
    const limit = Math.min(Math.max(1, Math.floor(page.limit)), USAGE_PAGE_MAX);
    const { prefix } = this.settings();
    const key = indexKey(prefix, by, parsed);
    const labels = new Set<string>();
    let cursor = page.cursor ?? "0";
    for (let scans = 0; scans < SCANS_PER_PAGE; scans++) {
      const [next, members] = await this.boundary.bounded(
        this.client.sscan(key, cursor, "COUNT", limit - labels.size),
      );
      for (const m of members) labels.add(m);
      cursor = next;
      if (cursor === "0" || labels.size >= limit) break;
    }
    const sorted = [...labels].sort();
    const reports = await this.boundary.bounded(
      Promise.all(
        sorted.map(async (label) => {
          const hash = usageKey(prefix, label, parsed);
          return reportOf(label, parsed, hash === undefined ? {} : await this.client.hgetall(hash));
        }),
      ),
    );
    return { callers: reports, next: cursor === "0" ? null : cursor };
  }

  async list(period: string, by: UsageBy): Promise<UsageReport[]> {
    return listAll((cursor) => this.listPage(period, by, { cursor, limit: USAGE_PAGE_MAX }));
  }

  private period(period: string): string {
    const parsed = parsePeriod(period, this.settings().tz);
    if (!parsed) throw new UsagePeriodError(period);
    return parsed.id;
  }
}
