// What the identity sources read of a compiled config: their settings, the plans and the keyed
// clients. The compiled runtime (config/compile.ts) is one; a source is given only this.
import type { CidrSet } from "../identity/ip.js";
import type { JwtVerifier } from "../identity/jwt-verifier.js";
import type { CompiledClient, CompiledPlan } from "./plan.js";

export interface IdentitySettings {
  header: string;
  bearer: boolean;
  onUnknown: "reject" | "anonymous";
  trustedProxies: CidrSet;
  clientIpHeader: "x-forwarded-for" | "forwarded";
  ipv6Prefix: number;
  /** Verifies bearer JWTs; undefined when the config has no identity.jwt. */
  jwt: JwtVerifier | undefined;
  jwtDefaultPlan: string | undefined;
  /** Invalid credentials one client IP may present per window before it is refused unchecked. */
  authFailures: { limit: number; windowMs: number } | undefined;
}

export interface IdentityView {
  readonly identity: IdentitySettings;
  readonly plans: ReadonlyMap<string, CompiledPlan>;
  readonly anonymousPlan: CompiledPlan | undefined;
  /** sha256(key) in hex → client. Plain keys are hashed here so lookups never see them. */
  readonly clientsByKeyHash: ReadonlyMap<string, CompiledClient>;
}
