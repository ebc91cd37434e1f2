// The audit log: every write an operator makes through the admin API (a reset, a reload, a key
// issued or revoked, an override set), by which token (its name, never its value), on what, and
// when. Endpoints call write() after they act; GET /admin/audit reads it back, newest first.
//
// With Redis it is a stream in the store's Redis, `<prefix>{rt}:audit` (the `{rt}` hash tag of
// all runtime state), shared by every instance: one pipeline per entry of XADD … MINID ~ (the
// entries older than the retention go as the stream grows), XTRIM MAXLEN ~ AUDIT_MAX_ENTRIES (a
// burst of writes stays bounded too) and PEXPIRE (a stream nobody writes to any more is gone
// once its newest entry is past the retention). Trimming by `~` lets Redis keep a partly old
// node, so reads also stop at the retention: nothing older is ever listed. An entry's time is
// its stream id, Redis's own clock, so entries of every instance are in one order.
//
// `memory://` keeps a ring of AUDIT_RING_ENTRIES in this process, read the same way.
//
// write() never rejects and never throws: an entry the store could not take is reported to
// `onError` (the gateway counts it in tollgate_store_errors_total and logs it) and the request
// that acted is answered as usual, at most the store timeout later.
import type { Cluster, Redis } from "ioredis";
import { StoreReplyError } from "../errors.js";
import { Boundary } from "../limits/stores/redis/boundary.js";

/** What an endpoint records after it acted. */
export interface AuditWrite {
  /** The admin token's name (AdminRequest.principal.name), never the token. */
  token: string;
  /** What was done, e.g. `DELETE /admin/callers`, `POST /admin/reload`, `keys.create`. */
  action: string;
  /** What it was done to, e.g. `client:acme`, a key id, a limit name. */
  target: string;
}

/** One entry as GET /admin/audit lists it. */
export interface AuditEntry extends AuditWrite {
  /** RFC 3339, UTC, to the millisecond. */
  time: string;
}

export interface AuditLog {
  /** Appends an entry. Never rejects: a failure goes to the log's onError. */
  write(entry: AuditWrite): Promise<void>;
  /**
   * The newest `limit` entries within the retention, newest first. Rejects with a StoreError when
   * the store cannot answer.
   */
  list(limit: number): Promise<AuditEntry[]>;
}

/** Entries the Redis stream keeps at most (XTRIM MAXLEN ~), whatever the retention. */
export const AUDIT_MAX_ENTRIES = 100_000;

/**
 * Entries the in-process ring of `memory://` keeps: each is a few hundred bytes, so a few MB at
 * most, and one instance's operators write far fewer within a retention.
 */
export const AUDIT_RING_ENTRIES = 10_000;

/** Longest text kept of each field (a target comes from a request path): longer is cut, marked "…". */
export const AUDIT_FIELD_MAX = 512;

/** The audit stream, under the store's prefix, in the `{rt}` slot of the runtime state. */
export function auditKey(prefix: string): string {
  return `${prefix}{rt}:audit`;
}

/** What the log reads from the running config, asked at each call so a reload applies. */
export interface AuditSettings {
  prefix: string;
  retentionMs: number;
}

/** Where the log is kept: the store's own Redis connection, or this process. */
export type AuditStore = { kind: "memory" } | { kind: "redis"; client: Redis | Cluster; timeoutMs: number };

export interface AuditOptions {
  settings: () => AuditSettings;
  /** An entry that was not written, and why (a StoreError for Redis's failures). */
  onError?: ((err: Error) => void) | undefined;
  /** Epoch ms: where the retention starts (and, in-process, each entry's time). */
  now?: (() => number) | undefined;
  /** The ring's size for `memory://` (tests make it small). */
  ringEntries?: number | undefined;
  /** The stream's MAXLEN for Redis (tests make it small). */
  maxEntries?: number | undefined;
}

export function createAuditLog(store: AuditStore, options: AuditOptions): AuditLog {
  return store.kind === "redis"
    ? new RedisAuditLog(store.client, store.timeoutMs, options)
    : new RingAuditLog(options);
}

/**
 * A field as it is kept: a string with its control characters escaped (`\n`, `\u001b`: an entry
 * read in a terminal or a log cannot rewrite a line), at most AUDIT_FIELD_MAX characters.
 */
export function auditField(value: unknown): string {
  const text = escapeControls(typeof value === "string" ? value : String(value));
  return text.length <= AUDIT_FIELD_MAX ? text : `${text.slice(0, AUDIT_FIELD_MAX - 1)}…`;
}

/** C0, DEL, C1, and the line and paragraph separators, as JSON-style escapes. */
export function escapeControls(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => {
    const short: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };
    return short[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
  });
}

/** The entry's three fields as kept; the time is added where it is written. */
function fieldsOf(entry: AuditWrite): AuditWrite {
  return {
    token: auditField(entry.token),
    action: auditField(entry.action),
    target: auditField(entry.target),
  };
}

/** onError that cannot throw into write(). */
function reporter(onError: ((err: Error) => void) | undefined): (err: unknown) => void {
  return (err) => {
    try {
      onError?.(err instanceof Error ? err : new Error(String(err)));
    } catch {
      // The report failed; the write must still resolve.
    }
  };
}

/** `memory://`: the newest entries in a fixed ring. */
export class RingAuditLog implements AuditLog {
  private readonly ring: (AuditEntry & { atMs: number })[] = [];
  /** Where the next entry goes once the ring is full (the oldest entry's slot). */
  private next = 0;
  private readonly size: number;
  private readonly settings: () => AuditSettings;
  private readonly now: () => number;
  private readonly report: (err: unknown) => void;

  constructor(options: AuditOptions) {
    this.size = Math.max(1, options.ringEntries ?? AUDIT_RING_ENTRIES);
    this.settings = options.settings;
    this.now = options.now ?? Date.now;
    this.report = reporter(options.onError);
  }

  write(entry: AuditWrite): Promise<void> {
    try {
      const atMs = this.now();
      const kept = { time: new Date(atMs).toISOString(), ...fieldsOf(entry), atMs };
      if (this.ring.length < this.size) this.ring.push(kept);
      else {
        this.ring[this.next] = kept;
        this.next = (this.next + 1) % this.size;
      }
    } catch (err) {
      this.report(err);
    }
    return Promise.resolve();
  }

  list(limit: number): Promise<AuditEntry[]> {
    const since = this.now() - this.settings().retentionMs;
    const out: AuditEntry[] = [];
    // Newest first: the slot before `next`, backwards round the ring.
    for (let i = 1; i <= this.ring.length && out.length < limit; i++) {
      const e = this.ring[(this.next - i + this.ring.length) % this.ring.length]!;
      if (e.atMs < since) break; // older ones are older still
      out.push({ time: e.time, token: e.token, action: e.action, target: e.target });
    }
    return Promise.resolve(out);
  }

  /** Entries held (past the retention or not): never above the ring's size. */
  get held(): number {
    return this.ring.length;
  }
}

/** The stream in the store's Redis. */
export class RedisAuditLog implements AuditLog {
  private readonly boundary: Boundary;
  private readonly settings: () => AuditSettings;
  private readonly now: () => number;
  private readonly report: (err: unknown) => void;
  private readonly maxEntries: number;

  constructor(
    private readonly client: Redis | Cluster,
    timeoutMs: number,
    options: AuditOptions,
  ) {
    this.boundary = new Boundary(timeoutMs);
    this.settings = options.settings;
    this.now = options.now ?? Date.now;
    this.report = reporter(options.onError);
    this.maxEntries = options.maxEntries ?? AUDIT_MAX_ENTRIES;
  }

  write(entry: AuditWrite): Promise<void> {
    let work: Promise<void>;
    try {
      const { prefix, retentionMs } = this.settings();
      const key = auditKey(prefix);
      const { token, action, target } = fieldsOf(entry);
      const minId = Math.max(0, Math.floor(this.now() - retentionMs));
      // One slot (the `{rt}` tag), so a Cluster pipeline goes to one node in one round trip.
      work = this.client
        .pipeline()
        .xadd(key, "MINID", "~", minId, "*", "token", token, "action", action, "target", target)
        .xtrim(key, "MAXLEN", "~", this.maxEntries)
        .pexpire(key, retentionMs)
        .exec()
        .then(failedCommand);
    } catch (err) {
      this.report(err);
      return Promise.resolve();
    }
    return this.boundary.bounded(work).then(
      () => {},
      (err: unknown) => this.report(this.boundary.toStoreError(err)),
    );
  }

  async list(limit: number): Promise<AuditEntry[]> {
    const { prefix, retentionMs } = this.settings();
    const since = Math.max(0, Math.floor(this.now() - retentionMs));
    const reply: unknown = await this.boundary.bounded(
      this.client.xrevrange(auditKey(prefix), "+", String(since), "COUNT", limit),
    );
    return parseEntries(reply);
  }
}

/** Throws the first error a pipeline's commands met (exec resolves even when one failed). */
function failedCommand(results: [Error | null, unknown][] | null): void {
  if (results === null) throw new Error("the audit pipeline was discarded");
  for (const [err] of results) if (err) throw err;
}

/**
 * XREVRANGE's reply, `[[id, [field, value, …]], …]`, as entries. A reply of another shape is the
 * store's fault (StoreReplyError); a field this version does not know is ignored, a missing one
 * read as "".
 */
export function parseEntries(reply: unknown): AuditEntry[] {
  if (!Array.isArray(reply)) throw new StoreReplyError("the audit stream's reply is not a list");
  return reply.map((item): AuditEntry => {
    if (!Array.isArray(item) || typeof item[0] !== "string" || !Array.isArray(item[1]))
      throw new StoreReplyError("an audit entry is not [id, fields]");
    const id = item[0];
    const fields = item[1] as unknown[];
    const ms = Number(id.slice(0, id.indexOf("-")));
    if (!Number.isSafeInteger(ms)) throw new StoreReplyError(`an audit entry's id is not a stream id: ${id}`);
    const out: AuditEntry = { time: new Date(ms).toISOString(), token: "", action: "", target: "" };
    for (let i = 0; i + 1 < fields.length; i += 2) {
      const name = fields[i];
      const value = fields[i + 1];
      if ((name === "token" || name === "action" || name === "target") && typeof value === "string")
        out[name] = value;
    }
    return out;
  });
}
