// The identity provider's key set of the running config, kept across reloads: a reload that
// leaves the IdP settings as they were keeps the keys already fetched (and their refresh
// timer), so a reload during an IdP outage loses nothing; one that changes them starts a new
// set and stops the old. The gateway owns one of these; the loader never fetches (--check is
// offline), it only describes what to fetch (spec.ts).
import type { JwtVerifier } from "../jwt-verifier.js";
import { type KeysStatus, RemoteJwks, type RemoteJwksDeps } from "./remote-jwks.js";
import { specKey } from "./spec.js";

export class RemoteKeySets {
  private current: { key: string; jwks: RemoteJwks; started: Promise<void> } | undefined;

  constructor(private readonly deps: RemoteJwksDeps) {}

  /** Gives a new config's verifier its keys: the running set when the spec is the same. */
  bind(verifier: JwtVerifier | undefined): void {
    const spec = verifier?.remote;
    if (verifier === undefined || spec === undefined) {
      this.current?.jwks.stop();
      this.current = undefined;
      return;
    }
    const key = specKey(spec);
    if (this.current?.key !== key) {
      this.current?.jwks.stop();
      const jwks = new RemoteJwks(spec, this.deps);
      this.current = { key, jwks, started: jwks.start() };
    }
    verifier.useRemoteKeys(this.current.jwks.getKey);
  }

  /** Resolves when the current set's first fetch has ended (at once without one). */
  firstFetch(): Promise<void> {
    return this.current?.started ?? Promise.resolve();
  }

  /** The running set's state; undefined when the config fetches no keys. */
  status(): KeysStatus | undefined {
    return this.current?.jwks.status();
  }

  stop(): void {
    this.current?.jwks.stop();
    this.current = undefined;
  }
}
