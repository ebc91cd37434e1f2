// Longest-prefix route matching on segment boundaries, then methods.
//
// Prefixes are looked up by walking the request path's ancestors (`/a/b/c`, `/a/b`, `/a`, `/`)
// in a map, so a lookup costs one map probe per path segment whatever the number of routes.

export interface MatchableRoute {
  /** Normalised, lower-cased, no trailing slash (except `/`). */
  matchPrefix: string;
  /** Upper-case methods; null matches every method. */
  methods: ReadonlySet<string> | null;
}

/**
 * The methods a route may name: RFC 9110's and PATCH (RFC 5789). CONNECT is one of them but never
 * reaches a route: the gateway does not tunnel CONNECT, so the config check refuses it apart.
 */
export const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];

/**
 * The routes of each prefix in the order a request tries them: routes that name methods first
 * (they are more specific than a catch-all on the same prefix), each kind in file order. The
 * matcher and the config check that finds shadowed routes (config/checks.ts) share it.
 */
export function routesByPrefix<R extends MatchableRoute>(routes: readonly R[]): Map<string, R[]> {
  const byPrefix = new Map<string, R[]>();
  for (const route of routes) {
    const list = byPrefix.get(route.matchPrefix) ?? [];
    list.push(route);
    byPrefix.set(route.matchPrefix, list);
  }
  // Array.prototype.sort is stable: file order holds within each kind.
  for (const list of byPrefix.values()) list.sort((a, b) => (a.methods ? 0 : 1) - (b.methods ? 0 : 1));
  return byPrefix;
}

export class RouteMatcher<R extends MatchableRoute> {
  private readonly byPrefix: Map<string, R[]>;

  constructor(routes: readonly R[]) {
    this.byPrefix = routesByPrefix(routes);
  }

  /** `matchPath` comes from normalizeTarget: lower-cased, without a trailing slash. */
  match(matchPath: string, method: string): R | undefined {
    let prefix = matchPath;
    for (;;) {
      const candidates = this.byPrefix.get(prefix);
      if (candidates) {
        for (const route of candidates) if (route.methods === null || route.methods.has(method)) return route;
      }
      if (prefix === "/") return undefined;
      const slash = prefix.lastIndexOf("/");
      prefix = slash <= 0 ? "/" : prefix.slice(0, slash);
    }
  }
}

/** `GET` also admits `HEAD`, as every HTTP server treats HEAD as a GET without a body. */
export function methodSet(methods: readonly string[] | undefined): ReadonlySet<string> | null {
  if (!methods || methods.length === 0) return null;
  const set = new Set(methods.map((m) => m.toUpperCase()));
  if (set.has("GET")) set.add("HEAD");
  return set;
}
