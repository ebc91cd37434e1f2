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

/** Where the keys come from, for logs and /readyz: the issuer, else the JWKS URL. */
export function specSource(spec: RemoteKeysSpec): string {
  return spec.issuer !== undefined ? `issuer ${spec.issuer}` : `jwks_url ${spec.jwksUrl}`;
}
