// The request path's way to stored keys: cache, then (throttled per client IP) the store, the
// answer made into a caller for the running config. What identity/api-key.ts asks once a key is
// none of the YAML's.
//
// Costs: a cached key (found or known unknown) answers synchronously, with no Redis command. An
// uncached key costs one HGETALL, shared by every request presenting it while that one is in
// flight, unless its address has used its lookups (key-cache.ts): then it is unknown unasked.
//
// Redis down: a cached key keeps working (nothing is asked). An uncached key's lookup fails; it
// is not cached either way, and the store's `on_failure` decides: `closed` answers 503, `open`
// and `local` treat the key as unknown (identity.api_key.on_unknown: 401, or anonymous).
//
// A change that lands while a lookup is in flight could make its answer stale (a key revoked
// between the HGETALL and its reply): such an answer serves that one request and is not cached.
import type { CompiledClient, CompiledPlan, Runtime } from "../config/compile.js";
import { compileClientPlan } from "../config/compile.js";
import type { StoredKeyAnswer, StoredKeyLookup } from "../identity/api-key.js";
import { DEFAULT_KEY_CACHE_MAX, KeyCache, LookupThrottle } from "./api-key-cache.js";
import { checkKeySpec } from "./api-key-spec.js";
import type { KeyStore, StoredKey } from "./api-keys.js";
import type { ChangeFeed } from "./changes.js";

/** A cached key, and what it was last made into (for the runtime it was made for). */
interface CachedKey {
  record: StoredKey;
  made: { rt: Runtime; answer: StoredKeyAnswer } | undefined;
}

export interface KeyLookupOptions {
  store: Pick<KeyStore, "lookup">;
  feed: Pick<ChangeFeed, "onChange" | "onReset">;
  /** Positive entries held at most (config `keys.cache`), asked at each insert. */
  cacheMax?: () => number;
  now?: () => number;
  /** A lookup the store failed (logged and counted by the gateway). */
  onError?: (err: Error) => void;
  /** Each store lookup's result, and each one the throttle spared: for a metric. */
  onLookup?: (result: LookupResult) => void;
}

export type LookupResult = "found" | "unknown" | "error" | "throttled";

export class KeyLookup implements StoredKeyLookup<Runtime> {
  readonly cache: KeyCache<CachedKey>;
  private readonly throttle: LookupThrottle;
  private readonly store: Pick<KeyStore, "lookup">;
  private readonly inFlight = new Map<string, Promise<StoredKey | undefined>>();
  /** Bumped by every change and reset: a lookup that saw it move does not cache its answer. */
  private epoch = 0;
  private readonly onError: (err: Error) => void;
  private readonly onLookup: (result: LookupResult) => void;

  constructor(options: KeyLookupOptions) {
    const now = options.now ?? Date.now;
    this.cache = new KeyCache(now, options.cacheMax ?? (() => DEFAULT_KEY_CACHE_MAX));
    this.throttle = new LookupThrottle(now);
    this.store = options.store;
    this.onError = options.onError ?? (() => {});
    this.onLookup = options.onLookup ?? (() => {});
    options.feed.onChange((change) => {
      if (change.kind !== "key") return;
      this.epoch++;
      this.cache.invalidate(change.hash);
    });
    options.feed.onReset(() => {
      this.epoch++;
      this.cache.clear();
    });
  }

  /** What this instance already knows of `hash`, without asking the store; undefined: nothing. */
  cached(hash: string, rt: Runtime): StoredKeyAnswer | undefined {
    const cached = this.cache.get(hash);
    if (cached?.kind === "found") return made(cached.value, rt);
    if (cached?.kind === "unknown") return UNKNOWN;
    return undefined;
  }

  find(hash: string, ipKey: string, rt: Runtime): StoredKeyAnswer | Promise<StoredKeyAnswer> {
    const cached = this.cache.get(hash);
    if (cached?.kind === "found") return made(cached.value, rt);
    if (cached?.kind === "unknown") return UNKNOWN;
    const pending = this.inFlight.get(hash);
    if (pending)
      return pending.then((r) => (r ? made({ record: r, made: undefined }, rt) : UNKNOWN), failed(rt));
    if (!this.throttle.take(ipKey)) {
      this.onLookup("throttled");
      return THROTTLED;
    }
    const epoch = this.epoch;
    const lookup = this.store.lookup(hash).finally(() => this.inFlight.delete(hash));
    this.inFlight.set(hash, lookup);
    return lookup.then(
      (record) => {
        this.onLookup(record ? "found" : "unknown");
        if (!record) {
          if (epoch === this.epoch) this.cache.rememberUnknown(hash);
          return UNKNOWN;
        }
        const entry: CachedKey = { record, made: undefined };
        if (epoch === this.epoch) this.cache.remember(hash, entry, record.expiresAtMs);
        return made(entry, rt);
      },
      (err: unknown) => {
        this.onLookup("error");
        this.onError(err instanceof Error ? err : new Error(String(err)));
        return failed(rt)();
      },
    );
  }
}

const UNKNOWN: StoredKeyAnswer = { kind: "unknown", throttled: false };
const THROTTLED: StoredKeyAnswer = { kind: "unknown", throttled: true };

function failed(rt: Runtime): () => StoredKeyAnswer {
  return () => ({ kind: "unavailable", closed: rt.config.store.on_failure === "closed" });
}

/** The cached key as a caller of `rt`, made once per runtime (a reload makes it again). */
function made(entry: CachedKey, rt: Runtime): StoredKeyAnswer {
  if (entry.made?.rt === rt) return entry.made.answer;
  const answer = answerFor(entry.record, rt);
  entry.made = { rt, answer };
  return answer;
}

/** YAML clients by id, per runtime: a YAML client with a stored key's client id wins. */
const yamlClients = new WeakMap<Runtime, Map<string, CompiledClient>>();

/** The config's client of this id (the first, as a request with its key would be served). */
export function yamlClient(rt: Runtime, id: string): CompiledClient | undefined {
  let byId = yamlClients.get(rt);
  if (!byId) {
    byId = new Map();
    for (const c of rt.clientsByKeyHash.values()) if (!byId.has(c.id)) byId.set(c.id, c);
    yamlClients.set(rt, byId);
  }
  return byId.get(id);
}

/**
 * A stored key in the running config. A YAML client of the same id wins: the key serves as that
 * client, with the YAML's plan, tenant and limits. Otherwise the key's plan must exist and its
 * limits still fit (a reload may have removed either): if not, the key is refused with a 403
 * saying why, rather than served under limits nobody chose.
 */
export function answerFor(record: StoredKey, rt: Runtime): StoredKeyAnswer {
  const yaml = yamlClient(rt, record.client);
  if (yaml) return { kind: "client", client: yaml };
  const plan = rt.plans.get(record.plan);
  if (!plan) {
    return {
      kind: "unusable",
      detail: `this API key is valid, but its plan "${record.plan}" is not in the gateway's configuration: ask the API's operator to restore the plan or to issue a key on another plan`,
    };
  }
  let compiled: CompiledPlan = plan;
  if (record.limits !== undefined) {
    const spec = checkKeySpec(rt.config, record);
    if (!spec.ok) {
      return {
        kind: "unusable",
        detail: `this API key is valid, but its own limits no longer fit plan "${record.plan}" (${spec.problems[0]}): ask the API's operator to issue a new key`,
      };
    }
    if (spec.limits) compiled = compileClientPlan(rt, record.plan, spec.limits);
  }
  return { kind: "client", client: { id: record.client, plan: compiled, tenant: record.tenant } };
}
