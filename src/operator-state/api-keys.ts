// API keys issued at runtime (POST /admin/keys), beside the YAML's clients. Only the SHA-256 of a
// key is ever stored: the key itself is shown once, in the answer that created it.
//
// Redis layout, under the store's prefix and the one `{rt}` hash tag (a Redis Cluster keeps
// runtime state in one slot, so every write below is one MULTI with its change record):
// - `<prefix>{rt}:key:<sha256 hex>`: a hash (id, client, plan, tenant, limits as JSON, created,
//   expires in epoch ms), what a request's lookup reads (one HGETALL);
// - `<prefix>{rt}:keyid:<id>`: the key's hash, to revoke or rotate by id;
// - `<prefix>{rt}:keys:<client>`: the set of the client's key ids, for listing (an id whose key
//   expired is dropped from it when the list next meets it).
// An expiring key's two strings carry PEXPIREAT at its expiry, so Redis lets it go by itself; the
// expiry is also in the record, so a cached key stops working at the same instant with no
// command. Rotation gives the old key that expiry (now + grace), or deletes it for grace 0, and
// marks it with its successor's id (`successor`): a key so marked is not rotated again.
//
// `memory://` keeps keys in this process only: they vanish with it, and another process (a
// second gateway, a worker) never sees them. Bounded by MEMORY_KEYS_MAX.

import { createHash, randomBytes } from "node:crypto";
import calculateSlot from "cluster-key-slot";
import type { Cluster, Redis } from "ioredis";
import { Boundary } from "../limits/stores/redis/boundary.js";
import type { ChangeFeed, RedisChangeFeed, WriteCommand } from "./changes.js";
import { storedObject } from "./stored-json.js";

/** A key's `limits`, as the operator wrote them (clients[].limits' shape); validated at create. */
export type KeyLimitsInput = Record<string, unknown>;

export interface StoredKey {
  id: string;
  /** SHA-256 of the key, hex. */
  hash: string;
  client: string;
  plan: string;
  tenant: string | undefined;
  limits: KeyLimitsInput | undefined;
  createdAtMs: number;
  /** Epoch ms; undefined: never expires. */
  expiresAtMs: number | undefined;
  /** The id of the key a rotation issued to replace this one (set while it lives out its grace). */
  successorId?: string | undefined;
}

export interface NewKey {
  client: string;
  plan: string;
  tenant?: string | undefined;
  limits?: KeyLimitsInput | undefined;
  /** From now; undefined: never expires. */
  expiresInMs?: number | undefined;
}

export interface IssuedKey {
  /** The key itself: shown once, stored nowhere. */
  key: string;
  record: StoredKey;
}

export interface KeyStore {
  create(spec: NewKey): Promise<IssuedKey>;
  /** The client's keys that have not expired, oldest first. */
  list(client: string): Promise<StoredKey[]>;
  /**
   * Every client's keys, a page at a time: about `limit` from `cursor` ("0" starts), and the
   * cursor of the next page (null: this was the last). A key issued during the walk may or may
   * not be listed; none is listed twice on a single Redis.
   */
  listAll(cursor: string, limit: number): Promise<KeyPage>;
  /** Revokes the key at once (on every instance within the propagation bound); undefined: no such id. */
  revoke(id: string): Promise<StoredKey | undefined>;
  /**
   * A successor with the same client, plan, tenant, limits and expiry; the old key keeps working
   * for `graceMs` (0: not at all) and is then gone. undefined: no such id. Rejects with
   * KeyBeingReplacedError for a key a rotation already replaced: a second successor would be
   * handed out last and yet die at the first rotation's grace end.
   */
  rotate(id: string, graceMs: number): Promise<{ issued: IssuedKey; previous: StoredKey } | undefined>;
  /** The request path's lookup: the key whose SHA-256 is `hash`, unless absent or expired. */
  lookup(hash: string): Promise<StoredKey | undefined>;
}

export interface KeyPage {
  keys: StoredKey[];
  next: string | null;
}

/** A page cursor: a SCAN cursor (an unsigned 64-bit number) or the memory store's offset. */
export const KEY_CURSOR = /^\d{1,20}$/;

/** Keys one client may hold (listing reads them all). */
export const KEYS_PER_CLIENT_MAX = 1000;

/** Keys a `memory://` gateway holds at most. */
export const MEMORY_KEYS_MAX = 100_000;

/** A rotation of a key that is already living out a rotation's grace (answered 409). */
export class KeyBeingReplacedError extends Error {
  constructor(
    readonly id: string,
    /** The key that replaces it, when the store knows it. */
    readonly successorId: string | undefined,
  ) {
    super(
      successorId === undefined
        ? `${id} was already rotated: this key is already being replaced`
        : `${id} was already rotated: rotate its successor ${successorId} instead`,
    );
    this.name = "KeyBeingReplacedError";
  }
}

/** A create the store refuses for a reason the operator can fix (answered 400). */
export class KeyStoreLimitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KeyStoreLimitError";
  }
}

const KEY_PREFIX = "tg_";
const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";

/** `tg_` + base64url of 256 random bits. */
export function newKey(): string {
  return KEY_PREFIX + randomBytes(32).toString("base64url");
}

/** `key_` + 12 random base32 characters (60 bits: ids are named, not guessed). */
export function newKeyId(): string {
  const bytes = randomBytes(12);
  let id = "key_";
  for (const b of bytes) id += BASE32[b & 31];
  return id;
}

export function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** What a listing shows instead of the key: the first 12 hex digits of its SHA-256. */
export function fingerprintOf(hash: string): string {
  return hash.slice(0, 12);
}

/** An id as newKeyId writes it: anything else is no key's. */
export const KEY_ID = /^key_[a-z2-7]{12}$/;

function record(spec: NewKey, id: string, hash: string, nowMs: number): StoredKey {
  return {
    id,
    hash,
    client: spec.client,
    plan: spec.plan,
    tenant: spec.tenant,
    limits: spec.limits,
    createdAtMs: nowMs,
    expiresAtMs: spec.expiresInMs === undefined ? undefined : Math.floor(nowMs + spec.expiresInMs),
  };
}

// --- Redis -------------------------------------------------------------------------------------

/** The cluster slot of "{rt}", where every runtime key lives. */
const RT_SLOT = calculateSlot("{rt}");

/** `text` with glob characters escaped, for SCAN's MATCH. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, "\\$&");
}

export function keyHashKey(prefix: string, hash: string): string {
  return `${prefix}{rt}:key:${hash}`;
}
export function keyIdKey(prefix: string, id: string): string {
  return `${prefix}{rt}:keyid:${id}`;
}
export function clientKeysKey(prefix: string, client: string): string {
  return `${prefix}{rt}:keys:${client}`;
}

/** A record's hash fields; absent tenant, limits and expiry are absent fields. */
export function fieldsOf(r: StoredKey): string[] {
  const f = ["id", r.id, "client", r.client, "plan", r.plan, "created", String(r.createdAtMs)];
  if (r.tenant !== undefined) f.push("tenant", r.tenant);
  if (r.limits !== undefined) f.push("limits", JSON.stringify(r.limits));
  if (r.expiresAtMs !== undefined) f.push("expires", String(r.expiresAtMs));
  if (r.successorId !== undefined) f.push("successor", r.successorId);
  return f;
}

/** A record from HGETALL, shape-checked: anything malformed reads as no key (and is not served). */
export function parseFields(hash: string, f: Readonly<Record<string, string>>): StoredKey | undefined {
  const { id, client, plan, created } = f;
  if (!id || !client || !plan || created === undefined) return undefined;
  const createdAtMs = Number(created);
  const expiresAtMs = f.expires === undefined ? undefined : Number(f.expires);
  if (!Number.isFinite(createdAtMs) || (expiresAtMs !== undefined && !Number.isFinite(expiresAtMs)))
    return undefined;
  let limits: KeyLimitsInput | undefined;
  if (f.limits !== undefined) {
    const parsed = storedObject(f.limits);
    if (!parsed) return undefined;
    limits = parsed as KeyLimitsInput;
  }
  const successorId = f.successor;
  return {
    id,
    hash,
    client,
    plan,
    tenant: f.tenant,
    limits,
    createdAtMs,
    expiresAtMs,
    ...(successorId === undefined ? {} : { successorId }),
  };
}

export interface RedisKeyStoreOptions {
  client: Redis | Cluster;
  prefix: string;
  /** store.timeout: each call's deadline. */
  timeoutMs: number;
  feed: RedisChangeFeed;
  now?: () => number;
}

export class RedisKeyStore implements KeyStore {
  private readonly client: Redis | Cluster;
  private readonly prefix: string;
  private readonly boundary: Boundary;
  private readonly feed: RedisChangeFeed;
  private readonly now: () => number;

  constructor(options: RedisKeyStoreOptions) {
    this.client = options.client;
    this.prefix = options.prefix;
    this.boundary = new Boundary(options.timeoutMs);
    this.feed = options.feed;
    this.now = options.now ?? Date.now;
  }

  async lookup(hash: string): Promise<StoredKey | undefined> {
    const f = await this.boundary.bounded(this.client.hgetall(keyHashKey(this.prefix, hash)));
    const r = parseFields(hash, f);
    return r && !expired(r, this.now()) ? r : undefined;
  }

  private async byId(id: string): Promise<StoredKey | undefined> {
    if (!KEY_ID.test(id)) return undefined;
    const hash = await this.boundary.bounded(this.client.get(keyIdKey(this.prefix, id)));
    if (hash === null) return undefined;
    const r = await this.lookup(hash);
    return r?.id === id ? r : undefined;
  }

  async create(spec: NewKey): Promise<IssuedKey> {
    const count = await this.boundary.bounded(this.client.scard(clientKeysKey(this.prefix, spec.client)));
    if (count >= KEYS_PER_CLIENT_MAX)
      throw new KeyStoreLimitError(
        `client "${spec.client}" holds ${count} keys, the most one client may: revoke some (GET /admin/keys?client=${spec.client} lists them)`,
      );
    return this.issue(spec, []);
  }

  /** Writes a new key (and `also`, e.g. a rotation's change to the old one) in one MULTI. */
  private async issue(spec: NewKey, also: WriteCommand[], id = newKeyId()): Promise<IssuedKey> {
    const key = newKey();
    const hash = sha256Hex(key);
    const r = record(spec, id, hash, this.now());
    const writes: WriteCommand[] = [
      ["hset", keyHashKey(this.prefix, hash), ...fieldsOf(r)],
      ["set", keyIdKey(this.prefix, r.id), hash],
      ["sadd", clientKeysKey(this.prefix, r.client), r.id],
    ];
    if (r.expiresAtMs !== undefined)
      writes.push(
        ["pexpireat", keyHashKey(this.prefix, hash), r.expiresAtMs],
        ["pexpireat", keyIdKey(this.prefix, r.id), r.expiresAtMs],
      );
    await this.boundary.bounded(this.feed.publishWith({ kind: "key", hash }, [...writes, ...also]));
    return { key, record: r };
  }

  async list(client: string): Promise<StoredKey[]> {
    const setKey = clientKeysKey(this.prefix, client);
    const ids = await this.boundary.bounded(this.client.smembers(setKey));
    const hashes = ids.length
      ? await this.boundary.bounded(this.client.mget(ids.map((id) => keyIdKey(this.prefix, id))))
      : [];
    const found: StoredKey[] = [];
    const gone: string[] = [];
    await Promise.all(
      ids.map(async (id, i) => {
        const hash = hashes[i];
        const r = hash ? await this.lookup(hash) : undefined;
        if (r?.id === id && r.client === client) found.push(r);
        else if (!hash) gone.push(id);
      }),
    );
    // Expired keys leave their id in the set; the first list after drops it.
    if (gone.length) await this.boundary.bounded(this.client.srem(setKey, ...gone)).catch(() => {});
    return found.sort((a, b) => a.createdAtMs - b.createdAtMs || a.id.localeCompare(b.id));
  }

  async listAll(cursor: string, limit: number): Promise<KeyPage> {
    const node = this.nodeOfKeys();
    const pattern = `${globEscape(this.prefix)}{rt}:keyid:*`;
    const ids: string[] = [];
    let next = cursor;
    // A few SCAN calls at most per page: MATCH filters after COUNT, so a sparse keyspace gives
    // short pages rather than a long wait.
    for (let calls = 0; calls < 8 && ids.length < limit; calls++) {
      const [after, keys] = await this.boundary.bounded(
        node.scan(next, "MATCH", pattern, "COUNT", limit * 4),
      );
      next = after;
      for (const k of keys) ids.push(k.slice(k.lastIndexOf(":") + 1));
      if (next === "0") break;
    }
    const found = (await Promise.all([...new Set(ids)].map((id) => this.byId(id)))).filter(
      (r): r is StoredKey => r !== undefined,
    );
    return {
      keys: found.sort((a, b) => a.createdAtMs - b.createdAtMs || a.id.localeCompare(b.id)),
      next: next === "0" ? null : next,
    };
  }

  /** The server holding the runtime keys: all under the {rt} tag, so one master of a cluster. */
  private nodeOfKeys(): Redis {
    const client = this.client;
    if (!("nodes" in client)) return client;
    // ioredis' slot map: slot → ["host:port" of its master, replicas…].
    const slots = (client as unknown as { slots: string[][] }).slots;
    const master = slots[RT_SLOT]?.[0];
    const node = client.nodes("master").find((n) => `${n.options.host}:${n.options.port}` === master);
    if (!node) throw this.boundary.toStoreError(new Error(`no master is known for the slot of {rt} yet`));
    return node;
  }

  async revoke(id: string): Promise<StoredKey | undefined> {
    const r = await this.byId(id);
    if (!r) return undefined;
    await this.boundary.bounded(
      this.feed.publishWith({ kind: "key", hash: r.hash }, [
        ["del", keyHashKey(this.prefix, r.hash)],
        ["del", keyIdKey(this.prefix, r.id)],
        ["srem", clientKeysKey(this.prefix, r.client), r.id],
      ]),
    );
    return r;
  }

  async rotate(id: string, graceMs: number): Promise<{ issued: IssuedKey; previous: StoredKey } | undefined> {
    const old = await this.byId(id);
    if (!old) return undefined;
    if (old.successorId !== undefined) throw new KeyBeingReplacedError(id, old.successorId);
    const successorId = newKeyId();
    if (!(await this.claim(old, successorId))) return undefined;
    const now = this.now();
    const until = Math.min(Math.floor(now + graceMs), old.expiresAtMs ?? Number.POSITIVE_INFINITY);
    const previous: StoredKey = { ...old, expiresAtMs: until };
    const successor = {
      client: old.client,
      plan: old.plan,
      tenant: old.tenant,
      limits: old.limits,
      expiresInMs: old.expiresAtMs === undefined ? undefined : Math.max(0, old.expiresAtMs - now),
    };
    let issued: IssuedKey;
    try {
      issued = await this.issue(successor, [], successorId);
    } catch (err) {
      // No successor was written: free the key for another rotation (best effort; a failed
      // HDEL leaves a 409 naming a successor that does not exist, and revoking the key ends it).
      await this.boundary
        .bounded(this.client.hdel(keyHashKey(this.prefix, old.hash), "successor"))
        .catch(() => {});
      throw err;
    }
    if (graceMs <= 0) {
      // The old key goes now: its deletion is one more change, published after the successor's.
      await this.revoke(id);
      return { issued, previous: { ...old, expiresAtMs: now, successorId } };
    }
    await this.boundary.bounded(
      this.feed.publishWith({ kind: "key", hash: old.hash }, [
        ["hset", keyHashKey(this.prefix, old.hash), "expires", String(until)],
        ["pexpireat", keyHashKey(this.prefix, old.hash), until],
        ["pexpireat", keyIdKey(this.prefix, old.id), until],
      ]),
    );
    return { issued, previous: { ...previous, successorId } };
  }

  /**
   * Marks `old` as replaced by `successorId`, or throws KeyBeingReplacedError if a rotation got
   * there first: HSETNX makes two rotations at once (two operators, a retried request) agree
   * on one successor. false: the key went (revoked, expired) since it was read; the HSETNX
   * then made a hash of that one field, deleted again at once.
   */
  private async claim(old: StoredKey, successorId: string): Promise<boolean> {
    const key = keyHashKey(this.prefix, old.hash);
    const replies = await this.boundary.bounded(
      this.client.multi().hsetnx(key, "successor", successorId).hget(key, "id").hget(key, "successor").exec(),
    );
    if (replies === null)
      throw new Error("the rotation's claim was not written: the transaction was aborted");
    for (const [err] of replies) if (err) throw err;
    const [claimed, stillId, current] = replies.map(([, reply]) => reply);
    if (stillId !== old.id) {
      if (claimed === 1) await this.boundary.bounded(this.client.del(key)).catch(() => {});
      return false;
    }
    if (claimed !== 1)
      throw new KeyBeingReplacedError(old.id, typeof current === "string" ? current : undefined);
    return true;
  }
}

function expired(r: StoredKey, nowMs: number): boolean {
  return r.expiresAtMs !== undefined && r.expiresAtMs <= nowMs;
}

// --- memory:// ---------------------------------------------------------------------------------

export class MemoryKeyStore implements KeyStore {
  private readonly byHash = new Map<string, StoredKey>();
  private readonly hashById = new Map<string, string>();
  private readonly now: () => number;

  constructor(
    private readonly feed: ChangeFeed,
    options: { now?: () => number; max?: number } = {},
  ) {
    this.now = options.now ?? Date.now;
    this.max = options.max ?? MEMORY_KEYS_MAX;
  }

  private readonly max: number;

  /** Lets go of expired keys (on every write, so the map holds live keys and the cap means them). */
  private sweep(): void {
    const now = this.now();
    for (const [hash, r] of this.byHash) if (expired(r, now)) this.drop(r, hash);
  }

  private drop(r: StoredKey, hash: string): void {
    this.byHash.delete(hash);
    this.hashById.delete(r.id);
  }

  lookup(hash: string): Promise<StoredKey | undefined> {
    const r = this.byHash.get(hash);
    return Promise.resolve(r && !expired(r, this.now()) ? r : undefined);
  }

  async create(spec: NewKey): Promise<IssuedKey> {
    this.sweep();
    if (this.byHash.size >= this.max)
      throw new KeyStoreLimitError(
        `this gateway (store memory://) holds ${this.byHash.size} keys, its most: revoke some, or use a Redis store`,
      );
    const held = (await this.list(spec.client)).length;
    if (held >= KEYS_PER_CLIENT_MAX)
      throw new KeyStoreLimitError(
        `client "${spec.client}" holds ${held} keys, the most one client may: revoke some (GET /admin/keys?client=${spec.client} lists them)`,
      );
    return this.issue(spec);
  }

  private async issue(spec: NewKey, id = newKeyId()): Promise<IssuedKey> {
    const key = newKey();
    const hash = sha256Hex(key);
    const r = record(spec, id, hash, this.now());
    this.byHash.set(hash, r);
    this.hashById.set(r.id, hash);
    await this.feed.publish({ kind: "key", hash });
    return { key, record: r };
  }

  list(client: string): Promise<StoredKey[]> {
    const now = this.now();
    const out = [...this.byHash.values()].filter((r) => r.client === client && !expired(r, now));
    return Promise.resolve(out.sort((a, b) => a.createdAtMs - b.createdAtMs || a.id.localeCompare(b.id)));
  }

  listAll(cursor: string, limit: number): Promise<KeyPage> {
    const now = this.now();
    const all = [...this.byHash.values()]
      .filter((r) => !expired(r, now))
      .sort((a, b) => a.createdAtMs - b.createdAtMs || a.id.localeCompare(b.id));
    const from = Number(cursor);
    const keys = all.slice(from, from + limit);
    return Promise.resolve({ keys, next: from + limit < all.length ? String(from + limit) : null });
  }

  private byId(id: string): StoredKey | undefined {
    const hash = this.hashById.get(id);
    const r = hash === undefined ? undefined : this.byHash.get(hash);
    return r && !expired(r, this.now()) ? r : undefined;
  }

  async revoke(id: string): Promise<StoredKey | undefined> {
    const r = this.byId(id);
    if (!r) return undefined;
    this.drop(r, r.hash);
    await this.feed.publish({ kind: "key", hash: r.hash });
    return r;
  }

  async rotate(id: string, graceMs: number): Promise<{ issued: IssuedKey; previous: StoredKey } | undefined> {
    const old = this.byId(id);
    if (!old) return undefined;
    if (old.successorId !== undefined) throw new KeyBeingReplacedError(id, old.successorId);
    const now = this.now();
    // Marked before the first await, so a rotation that starts meanwhile is refused.
    const successorId = newKeyId();
    this.byHash.set(old.hash, { ...old, successorId });
    const issued = await this.issue(
      {
        client: old.client,
        plan: old.plan,
        tenant: old.tenant,
        limits: old.limits,
        expiresInMs: old.expiresAtMs === undefined ? undefined : Math.max(0, old.expiresAtMs - now),
      },
      successorId,
    );
    if (graceMs <= 0) {
      await this.revoke(id);
      return { issued, previous: { ...old, expiresAtMs: now, successorId } };
    }
    const until = Math.min(Math.floor(now + graceMs), old.expiresAtMs ?? Number.POSITIVE_INFINITY);
    const previous = { ...old, expiresAtMs: until, successorId };
    this.byHash.set(old.hash, previous);
    await this.feed.publish({ kind: "key", hash: old.hash });
    return { issued, previous };
  }
}

/** The key store for a store: in-process for `memory://`, the store's Redis otherwise. */
export function createKeyStore(
  store: { kind: "memory"; feed: ChangeFeed } | (Omit<RedisKeyStoreOptions, "now"> & { kind: "redis" }),
  now?: () => number,
): KeyStore {
  return store.kind === "memory"
    ? new MemoryKeyStore(store.feed, { now })
    : new RedisKeyStore({ ...store, now });
}
