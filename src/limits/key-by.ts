// What a limit is keyed by (`by:`), and the one place where a request's values become part of a
// state key. Values come from the client (a header, a query parameter, a path segment) or from a
// verified token (a claim), so none is trusted to be short or to keep out of the key's structure:
// each is written literally only when it is short printable ASCII, escaped where it holds a
// character that structures the key, and hashed otherwise. A part the request lacks is keyed by
// the caller instead, never skipped: leaving a header out must not escape its limit.
import { createHash } from "node:crypto";
import type { LimitScope } from "./scope.js";

/**
 * What a key reads of its caller: who it is, its tenant, its address, a JWT's claims. The
 * identity's Caller (model/caller.ts) is one; named here so that limits need not know callers'
 * plans, which are made of limits.
 */
export type KeyedCaller =
  | {
      readonly kind: "client";
      readonly id: string;
      readonly tenant: string | undefined;
      readonly ipKey: string;
      readonly claims?: Readonly<Record<string, unknown>>;
    }
  | { readonly kind: "anonymous"; readonly ipKey: string };

/** One dimension of a limit's key. */
export type KeyPart =
  | { readonly kind: "caller" | "tenant" | "ip" | "route" }
  | { readonly kind: "header" | "query" | "claim" | "body"; readonly name: string }
  | { readonly kind: "segment"; readonly index: number };

/** A limit's `by`, compiled: its parts in the order written. */
export interface KeyBy {
  readonly parts: readonly KeyPart[];
  /**
   * A lone caller, tenant or ip part: the key is the caller's scope key and the limit's name,
   * as it has always been, and nothing is read from the request.
   */
  readonly scope: LimitScope | undefined;
  /**
   * The first caller, tenant or ip part: the key's hash tag is that scope's (state-keys.ts), so the
   * limit lives in the caller's Redis Cluster slot beside its other limits. Without one the
   * hash tag is the limit's name and values: each value its own slot, a route budget one key.
   */
  readonly tagPart: (KeyPart & { readonly kind: LimitScope }) | undefined;
  /** How `--check`, the admin API and the docs write it: `caller`, `[caller, header:x-model]`. */
  readonly text: string;
}

/** What of a request a keyed limit may read. Header names are lower case, as Node gives them. */
export interface KeyedRequest {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The normalised path (routing/normalize.ts), whose segments `segment:<n>` counts from 1. */
  readonly path: string;
  /** The query string as received, with its `?`, or empty. */
  readonly query: string;
  /** An AI route's JSON request body (its top-level members), which `body:<field>` reads. */
  readonly body?: Readonly<Record<string, unknown>> | undefined;
}

/** The deepest segment `segment:<n>` may name. */
export const MAX_SEGMENT = 32;
/** RFC 9110 token: what a header name (and, here, a query parameter name) may be. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}$/;
/** A JWT claim name: a token, or a URI-like name (`https://example.com/org`). */
const CLAIM_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z:/]{1,128}$/;

export const KEY_PART_FORMS =
  "caller, tenant, ip, route, header:<name>, query:<name>, claim:<name>, body:<field> or segment:<n>";
/** A top-level member name of a JSON body: letters, digits, `_` and `-`. */
const BODY_FIELD = /^[A-Za-z0-9_-]{1,64}$/;

const SIMPLE: Readonly<Record<string, KeyPart>> = {
  caller: { kind: "caller" },
  tenant: { kind: "tenant" },
  ip: { kind: "ip" },
  route: { kind: "route" },
};

/** One written part (`header:x-org-id`), or why it cannot be one. */
export function parseKeyPart(text: string): KeyPart | { error: string } {
  const simple = SIMPLE[text];
  if (simple) return simple;
  const colon = text.indexOf(":");
  if (colon === -1) return { error: `"${text}" is not a key part: expected ${KEY_PART_FORMS}` };
  const kind = text.slice(0, colon);
  const name = text.slice(colon + 1);
  switch (kind) {
    case "header":
      if (!TOKEN.test(name)) {
        return {
          error: `"${name}" is not a header name: a header name is a token (letters, digits and !#$%&'*+-.^_\`|~, 1 to 64 of them)`,
        };
      }
      return { kind: "header", name: name.toLowerCase() };
    case "query":
      if (!TOKEN.test(name)) {
        return {
          error: `"${name}" is not a query parameter name tollgate can key by: use letters, digits and !#$%&'*+-.^_\`|~ (1 to 64 of them)`,
        };
      }
      return { kind: "query", name };
    case "claim":
      if (!CLAIM_NAME.test(name)) {
        return {
          error: `"${name}" is not a claim name: use letters, digits, ":", "/" and token characters (1 to 128)`,
        };
      }
      return { kind: "claim", name };
    case "body":
      if (!BODY_FIELD.test(name)) {
        return {
          error: `"${name}" is not a body field tollgate can key by: name a top-level member of the JSON request body (letters, digits, _ and -, 1 to 64 of them), e.g. body:model`,
        };
      }
      return { kind: "body", name };
    case "segment": {
      const index = /^[1-9][0-9]?$/.test(name) ? Number(name) : Number.NaN;
      if (!(index >= 1 && index <= MAX_SEGMENT)) {
        return {
          error: `segment:${name} names no path segment: write segment:<n>, n from 1 to ${MAX_SEGMENT} (/v1/reports/{id} is segment:3)`,
        };
      }
      return { kind: "segment", index };
    }
    default:
      return { error: `"${text}" is not a key part: expected ${KEY_PART_FORMS}` };
  }
}

/** A written `by` (one part or a list), or why it cannot be one; `at` is the failing list index. */
export function parseKeyBy(written: string | readonly string[]): KeyBy | { error: string; at?: number } {
  const list = typeof written === "string" ? [written] : written;
  if (list.length === 0) return { error: `list at least one key part: ${KEY_PART_FORMS}` };
  const parts: KeyPart[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < list.length; i++) {
    const text = list[i]!;
    const part = parseKeyPart(text);
    if ("error" in part)
      return typeof written === "string" ? { error: part.error } : { error: part.error, at: i };
    const id = partText(part);
    if (seen.has(id)) return { error: `${id} is listed twice: each part keys once`, at: i };
    seen.add(id);
    parts.push(part);
  }
  return keyBy(parts);
}

/** A `by` made of these parts. */
export function keyBy(parts: readonly KeyPart[]): KeyBy {
  const frozen = Object.freeze(parts.map((p) => Object.freeze({ ...p })));
  const tagPart = frozen.find(isScopePart);
  const lone = frozen.length === 1 && tagPart !== undefined;
  const text = frozen.length === 1 ? partText(frozen[0]!) : `[${frozen.map(partText).join(", ")}]`;
  return Object.freeze({ parts: frozen, scope: lone ? tagPart.kind : undefined, tagPart, text });
}

/** The `by` of a limit keyed as routes have always keyed: by caller, tenant or IP. */
export function scopeBy(scope: LimitScope): KeyBy {
  return SCOPE_BY[scope];
}

const SCOPE_BY: Readonly<Record<LimitScope, KeyBy>> = {
  caller: keyBy([{ kind: "caller" }]),
  tenant: keyBy([{ kind: "tenant" }]),
  ip: keyBy([{ kind: "ip" }]),
};

export const ROUTE_BY: KeyBy = keyBy([{ kind: "route" }]);

function isScopePart(part: KeyPart): part is KeyPart & { readonly kind: LimitScope } {
  return part.kind === "caller" || part.kind === "tenant" || part.kind === "ip";
}

export function partText(part: KeyPart): string {
  switch (part.kind) {
    case "header":
    case "query":
    case "claim":
    case "body":
      return `${part.kind}:${part.name}`;
    case "segment":
      return `segment:${part.index}`;
    default:
      return part.kind;
  }
}

/** Whether any part reads the request or the token (not only who calls and where). */
export function readsRequest(by: KeyBy): boolean {
  return by.parts.some(
    (p) =>
      p.kind === "header" ||
      p.kind === "query" ||
      p.kind === "claim" ||
      p.kind === "segment" ||
      p.kind === "body",
  );
}

/** Whether any part reads the request body (`body:<field>`): only AI routes read one. */
export function readsBody(by: KeyBy): boolean {
  return by.parts.some((p) => p.kind === "body");
}

// --- Values into key text ---------------------------------------------------------------------

/** Longest value written literally; longer ones are hashed. */
const LITERAL_MAX = 64;
/** Longest tail of parts written literally; a longer one is hashed as a whole. */
export const TAIL_MAX = 64;
/** Printable ASCII without space: anything else (controls, non-ASCII, space) is hashed. */
const PRINTABLE = /^[\x21-\x7e]+$/;
/** Characters that structure a key (`{}` hash tag, `:` separator, `%` escape, `#` hash marker). */
const STRUCTURAL = /[{}:%#]/g;

/** 22 base64url characters (132 bits) of SHA-256, after `#`: no literal value starts with `#`. */
export function hashed(text: string): string {
  return `#${createHash("sha256").update(text, "utf8").digest("base64url").slice(0, 22)}`;
}

/**
 * A value as key text: literal when short printable ASCII, with `{ } : % #` escaped as `%xx`;
 * hashed otherwise. One-to-one: an escaped literal never holds a raw `#`, a hash always starts
 * with one, and `%` is itself escaped.
 */
export function valueText(value: string): string {
  if (value.length > LITERAL_MAX || !PRINTABLE.test(value)) return hashed(value);
  const escaped = value.replace(STRUCTURAL, (c) => `%${c.charCodeAt(0).toString(16)}`);
  return escaped.length > LITERAL_MAX ? hashed(value) : escaped;
}

/** Who calls, as a value: the client's id or the anonymous caller's address. */
function callerValue(caller: KeyedCaller): string {
  return caller.kind === "client" ? `client:${caller.id}` : `ip:${caller.ipKey}`;
}

/** A part's name in key text: `h.x-org-id`; its value follows after `=`, a fallback after `@`. */
function partLabel(part: KeyPart): string {
  switch (part.kind) {
    case "caller":
      return "c";
    case "tenant":
      return "t";
    case "ip":
      return "i";
    case "route":
      return "r";
    case "header":
      return `h.${valueText(part.name)}`;
    case "query":
      return `q.${valueText(part.name)}`;
    case "claim":
      return `j.${valueText(part.name)}`;
    case "body":
      return `b.${valueText(part.name)}`;
    case "segment":
      return `s.${part.index}`;
  }
}

/** The value of one part for one request; undefined: the request lacks it (keyed by caller). */
export function partValue(
  part: KeyPart,
  caller: KeyedCaller,
  routeName: string,
  request: KeyedRequest | undefined,
): string | undefined {
  switch (part.kind) {
    case "caller":
      return callerValue(caller);
    case "tenant":
      return caller.kind === "client" ? caller.tenant : undefined;
    case "ip":
      return caller.ipKey;
    case "route":
      return routeName;
    case "header": {
      const value = request?.headers[part.name];
      const text = typeof value === "string" ? value : value?.join("\n");
      return text === undefined || text.trim() === "" ? undefined : text;
    }
    case "query":
      return request ? queryValue(request.query, part.name) : undefined;
    case "claim":
      if (caller.kind !== "client" || caller.claims === undefined) return undefined;
      return scalarText(caller.claims[part.name]);
    case "body":
      return scalarText(request?.body?.[part.name]);
    case "segment":
      return request ? pathSegment(request.path, part.index) : undefined;
  }
}

/**
 * A body member as key text: a string as it is, a number or boolean as JSON writes it; anything
 * else (an object, a list, null) or an empty string is missing, and keys by the caller.
 */
function scalarText(value: unknown): string | undefined {
  if (typeof value === "string") return value === "" ? undefined : value;
  return typeof value === "number" || typeof value === "boolean" ? String(value) : undefined;
}

/**
 * The n-th segment (1-based) of a normalised path, if it has one that is not empty, decoded as
 * an upstream decodes it: `a%3Ab` and `a:b` are one id to it, so one budget here. (The
 * normaliser has refused an encoded `/` and invalid UTF-8.) Case is kept: whether `R-17` and
 * `r-17` are one resource is the upstream's to say.
 */
export function pathSegment(path: string, index: number): string | undefined {
  let start = 0;
  for (let i = 0; i < index; i++) {
    start = path.indexOf("/", start);
    if (start === -1) return undefined;
    start++;
  }
  const end = path.indexOf("/", start);
  const segment = end === -1 ? path.slice(start) : path.slice(start, end);
  if (segment === "") return undefined;
  if (!segment.includes("%")) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/**
 * The one value of a query parameter, decoded as an upstream decodes it. A parameter given twice
 * is refused before any limit is asked (admit.ts: which one an upstream reads is its own
 * choice), so the first one is as good as any here.
 */
export function queryValue(query: string, name: string): string | undefined {
  if (query.length < 2) return undefined;
  const value = new URLSearchParams(query.slice(1)).get(name);
  return value === null || value === "" ? undefined : value;
}

/**
 * The parts after the hash tag, as key text: `h.x-model=gpt-4:s.3=r-17`, each missing value
 * replaced by the caller (`h.x-model@client%3abob`). `skip` is the part the tag already holds.
 * Hashed as a whole past TAIL_MAX, so no number of parts grows a key past the bound.
 */
export function keyTail(
  by: KeyBy,
  skip: KeyPart | undefined,
  caller: KeyedCaller,
  routeName: string,
  request: KeyedRequest | undefined,
): string {
  let tail = "";
  for (const part of by.parts) {
    if (part === skip) continue;
    const value = partValue(part, caller, routeName, request);
    const text =
      value === undefined
        ? `${partLabel(part)}@${valueText(callerValue(caller))}`
        : `${partLabel(part)}=${valueText(value)}`;
    tail = tail === "" ? text : `${tail}:${text}`;
  }
  return tail.length > TAIL_MAX ? hashed(tail) : tail;
}
