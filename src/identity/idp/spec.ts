// Where a gateway fetches its JWT keys from, as the loader reads it from identity.jwt: plain
// data (it crosses threads with the loaded config), compared whole to decide whether a reload
// keeps the keys already fetched.

export interface RemoteKeysSpec {
  /** OIDC discovery: GET <issuer>/.well-known/openid-configuration, whose `issuer` must equal this. */
  issuer?: string | undefined;
  /** The JWKS itself, without discovery. */
  jwksUrl?: string | undefined;
  /** PEM certificates that sign the IdP's certificate (identity.jwt.ca_file), else the system's. */
  ca?: string | undefined;
  fetchTimeoutMs: number;
  refetchIntervalMs: number;
  cacheFloorMs: number;
  cacheCeilingMs: number;
}

/** Equal specs share one key set across reloads. */
export function specKey(spec: RemoteKeysSpec): string {
  return JSON.stringify([
    spec.issuer ?? null,
    spec.jwksUrl ?? null,
    spec.ca ?? null,
    spec.fetchTimeoutMs,
    spec.refetchIntervalMs,
    spec.cacheFloorMs,
    spec.cacheCeilingMs,
  ]);
}

/**
 * Where the keys come from, for logs and the unauthenticated /readyz: the issuer, else the JWKS
 * URL, without what may be a credential (a user:password, a query such as ?access_token=).
 */
export function specSource(spec: RemoteKeysSpec): string {
  return spec.issuer !== undefined
    ? `issuer ${shownUrl(spec.issuer)}`
    : `jwks_url ${shownUrl(spec.jwksUrl!)}`;
}

function shownUrl(text: string): string {
  try {
    const url = new URL(text);
    const hidden = url.username !== "" || url.password !== "" || url.search !== "";
    url.username = "";
    url.password = "";
    url.search = "";
    return hidden ? `${url.href} (credentials and query hidden)` : text;
  } catch {
    return "(an unreadable URL)";
  }
}

/** The same IdP endpoint: keys fetched from it stay good while other settings change. */
export function sameSource(a: RemoteKeysSpec, b: RemoteKeysSpec): boolean {
  return a.issuer === b.issuer && a.jwksUrl === b.jwksUrl;
}
