// The identity provider's key set of the running config, kept across reloads: a reload that
// leaves the IdP settings as they were keeps the keys already fetched (and their refresh
// timer), so a reload during an IdP outage loses nothing; one that changes them starts a new
// set and stops the old, the new one starting from the old one's keys when the IdP is the same. The gateway owns one of these; the loader never fetches (--check is
// offline), it only describes what to fetch (spec.ts).
import type { JwtVerifier } from "../jwt-verifier.js";
import { type KeysStatus, RemoteJwks, type RemoteJwksDeps } from "./remote-jwks.js";
import { type RemoteKeysSpec, sameSource, specKey } from "./spec.js";

export class RemoteKeySets {
  private current:
    | { key: string; spec: RemoteKeysSpec; jwks: RemoteJwks; started: Promise<void> }
    | undefined;

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
      const previous = this.current;
      previous?.jwks.stop();
      // A new CA or deadline for the same IdP is what an operator changes during its outage:
      // the keys already fetched from it keep serving until the new set fetches its own.
      const inherited = previous && sameSource(previous.spec, spec) ? previous.jwks.heldKeys() : undefined;
      const jwks = new RemoteJwks(spec, this.deps, inherited);
      this.current = { key, spec, jwks, started: jwks.start() };
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
