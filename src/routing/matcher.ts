// Longest-prefix route matching on segment boundaries, then the request's host, then methods.
//
// Prefixes are looked up by walking the request path's ancestors (`/a/b/c`, `/a/b`, `/a`, `/`)
// in a map, so a lookup costs one map probe per path segment whatever the number of routes.
// A config whose routes name hosts also resolves the request's Host once, to the host patterns
// it matches (hostChains below); a config without hosts never reads the Host header.
//
// Precedence, in this order: the longest path prefix; on one prefix, routes for the request's
// exact host, then for `*.` suffixes it falls under (longer suffix first), then routes without a
// host; among routes of one host pattern and prefix, routes that name methods before catch-alls,
// each kind in file order. A route whose host or methods do not take the request is skipped
// for the next one in that order, as a route whose methods did not match always was.

import { requestHost, WILDCARD } from "./host.js";

export interface MatchableRoute {
  /** Normalised, lower-cased, no trailing slash (except `/`). */
  matchPrefix: string;
  /** Upper-case methods; null matches every method. */
  methods: ReadonlySet<string> | null;
  /**
   * The Host this route serves, as routing/host.ts spells it (`api.example.com`,
   * `*.example.com`); null serves every host.
   */
  host: string | null;
}

/**
 * The methods a route may name: RFC 9110's and PATCH (RFC 5789). CONNECT is one of them but never
 * reaches a route: the gateway does not tunnel CONNECT, so the config check refuses it apart.
 */
export const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];

/**
 * Routes that compete for the same requests (one host pattern or none, one prefix), each group
 * in the order a request tries it: routes that name methods first (they are more specific than a
 * catch-all on the same prefix), each kind in file order. The matcher and the config check that
 * finds shadowed routes (config/checks.ts) share it: routes of different groups never shadow
 * each other, since each serves requests the other does not.
 */
export function competingRoutes<R extends MatchableRoute>(routes: readonly R[]): R[][] {
  const groups = new Map<string, R[]>();
  for (const route of routes) {
    // A space is in neither a host nor a normalised path: the key cannot be ambiguous.
    const key = `${route.host ?? ""} ${route.matchPrefix}`;
    const list = groups.get(key);
    if (list) list.push(route);
    else groups.set(key, [route]);
  }
  // Array.prototype.sort is stable: file order holds within each kind.
  for (const list of groups.values()) list.sort((a, b) => (a.methods ? 0 : 1) - (b.methods ? 0 : 1));
  return [...groups.values()];
}

/** The routes of one prefix: those of each host pattern, and those for every host. */
interface PrefixRoutes<R> {
  /** By host pattern; null when no route of this prefix names a host. */
  byHost: Map<string, R[]> | null;
  anyHost: R[];
}

const NO_ROUTES: never[] = [];

export class RouteMatcher<R extends MatchableRoute> {
  private readonly byPrefix = new Map<string, PrefixRoutes<R>>();
  /**
   * Segments of the deepest prefix: a path's ancestors below it cannot be a prefix, and hashing
   * each of them for a lookup would cost time quadratic in the path's length (a 16 KB path of
   * 7,900 segments took 100 ms).
   */
  private readonly maxDepth: number;
  /** Null when no route names a host: the Host header is then never read. */
  private readonly hosts: HostChains | null;

  constructor(routes: readonly R[]) {
    const patterns = new Set<string>();
    let maxDepth = 0;
    for (const group of competingRoutes(routes)) {
      const { host, matchPrefix } = group[0]!;
      maxDepth = Math.max(maxDepth, depthOf(matchPrefix));
      let entry = this.byPrefix.get(matchPrefix);
      if (!entry) {
        entry = { byHost: null, anyHost: NO_ROUTES };
        this.byPrefix.set(matchPrefix, entry);
      }
      if (host === null) entry.anyHost = group;
      else {
        entry.byHost ??= new Map();
        entry.byHost.set(host, group);
        patterns.add(host);
      }
    }
    this.hosts = patterns.size > 0 ? new HostChains(patterns) : null;
    this.maxDepth = maxDepth;
  }

  /**
   * `matchPath` comes from normalizeTarget: lower-cased, without a trailing slash. `host` is the
   * request's Host header as received (routing/host.ts spells it), read only when some route
   * names a host.
   */
  match(matchPath: string, method: string, host?: string | undefined): R | undefined {
    const chain = this.hosts === null ? null : this.hosts.chainOf(host);
    let prefix = ancestorAt(matchPath, this.maxDepth);
    for (;;) {
      const entry = this.byPrefix.get(prefix);
      if (entry) {
        if (chain !== null && entry.byHost !== null) {
          for (const pattern of chain) {
            const hosted = entry.byHost.get(pattern);
            if (hosted) for (const route of hosted) if (takes(route, method)) return route;
          }
        }
        for (const route of entry.anyHost) if (takes(route, method)) return route;
      }
      if (prefix === "/") return undefined;
      const slash = prefix.lastIndexOf("/");
      prefix = slash <= 0 ? "/" : prefix.slice(0, slash);
    }
  }
}

/** Segments of a normalised prefix: `/` has none, `/a/b` two. */
function depthOf(prefix: string): number {
  let depth = 0;
  for (let i = 0; i < prefix.length; i++) if (prefix.charCodeAt(i) === 47 && i + 1 < prefix.length) depth++;
  return depth;
}

/** `path` cut after its first `depth` segments (`/a/b/c`, 2 → `/a/b`); the path itself if shorter. */
export function ancestorAt(path: string, depth: number): string {
  if (depth === 0) return "/";
  let slash = 0;
  for (let i = 0; i < depth; i++) {
    slash = path.indexOf("/", slash + 1);
    if (slash === -1) return path;
  }
  return path.slice(0, slash);
}

function takes(route: MatchableRoute, method: string): boolean {
  return route.methods === null || route.methods.has(method);
}

/**
 * For each host a request may name, the host patterns of the config it matches, most specific
 * first: its exact name, then each `*.` suffix it falls under, longest first. Computed once per
 * pattern of the config, so a request costs one lookup of its name, plus one per label of it
 * when the name is not itself a pattern and some pattern is a suffix.
 */
class HostChains {
  /** By exact name. */
  private readonly exact = new Map<string, readonly string[]>();
  /** By the suffix with its leading dot (`.example.com` for `*.example.com`). */
  private readonly suffixes = new Map<string, readonly string[]>();

  constructor(patterns: ReadonlySet<string>) {
    const suffixPatterns = new Set<string>();
    for (const p of patterns) if (p.startsWith(WILDCARD)) suffixPatterns.add(p.slice(1));
    /** The suffix patterns `name` falls under, longest first (the first dot gives the longest). */
    const under = (name: string, from: number): string[] => {
      const found: string[] = [];
      for (let dot = name.indexOf(".", from); dot !== -1; dot = name.indexOf(".", dot + 1)) {
        const suffix = name.slice(dot);
        if (dot > 0 && suffixPatterns.has(suffix)) found.push(`*${suffix}`);
      }
      return found;
    };
    for (const p of patterns) {
      if (p.startsWith(WILDCARD)) this.suffixes.set(p.slice(1), [p, ...under(p, 2)]);
      else this.exact.set(p, [p, ...under(p, 0)]);
    }
  }

  /** The patterns a request's Host header matches, most specific first; null when none. */
  chainOf(header: string | undefined): readonly string[] | null {
    const name = requestHost(header);
    if (name === undefined) return null;
    const exact = this.exact.get(name);
    if (exact) return exact;
    if (this.suffixes.size === 0) return null;
    // `*.example.com` takes `a.example.com`, never `example.com` itself: a dot at 0 is skipped.
    for (let dot = name.indexOf(".", 1); dot !== -1; dot = name.indexOf(".", dot + 1)) {
      const chain = this.suffixes.get(name.slice(dot));
      if (chain) return chain;
    }
    return null;
  }
}

/** `GET` also admits `HEAD`, as every HTTP server treats HEAD as a GET without a body. */
export function methodSet(methods: readonly string[] | undefined): ReadonlySet<string> | null {
  if (!methods || methods.length === 0) return null;
  const set = new Set(methods.map((m) => m.toUpperCase()));
  if (set.has("GET")) set.add("HEAD");
  return set;
}
