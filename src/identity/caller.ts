// Who is calling: an API key's client, or an anonymous caller known by IP.
import { createHash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { CompiledPlan, Runtime } from "../config/compile.js";

export type Caller =
  | { kind: "client"; id: string; plan: CompiledPlan; tenant: string | undefined; ipKey: string }
  | { kind: "anonymous"; plan: CompiledPlan | undefined; ipKey: string };

export type Identification =
  | { ok: true; caller: Caller }
  | { ok: false; reason: "unknown_key" | "ambiguous_key" | "credential_required"; detail: string };

const BEARER = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;

/** The API key a request presents, or undefined; an array means the header was sent twice. */
export function presentedKey(headers: IncomingHttpHeaders, rt: Runtime): string | string[] | undefined {
  const value = headers[rt.identity.header];
  if (value !== undefined) return value;
  if (!rt.identity.bearer) return undefined;
  const auth = headers.authorization;
  if (!auth) return undefined;
  return BEARER.exec(auth)?.[1];
}

export function identifyCaller(headers: IncomingHttpHeaders, ipKey: string, rt: Runtime): Identification {
  const key = presentedKey(headers, rt);
  if (Array.isArray(key)) {
    return { ok: false, reason: "ambiguous_key", detail: `send the ${rt.identity.header} header once` };
  }
  if (key !== undefined) {
    // Compared by hash: config never holds a usable key in memory, and a timing difference in a
    // map lookup reveals nothing about a key whose hash the attacker cannot steer.
    const client = rt.clientsByKeyHash.get(createHash("sha256").update(key).digest("hex"));
    if (client)
      return {
        ok: true,
        caller: { kind: "client", id: client.id, plan: client.plan, tenant: client.tenant, ipKey },
      };
    if (rt.identity.onUnknown === "reject") {
      return { ok: false, reason: "unknown_key", detail: "the API key is not valid" };
    }
  }
  if (!rt.anonymousPlan && rt.clientsByKeyHash.size > 0) {
    return {
      ok: false,
      reason: "credential_required",
      detail: `an API key is required (header ${rt.identity.header}${rt.identity.bearer ? " or Authorization: Bearer" : ""})`,
    };
  }
  return { ok: true, caller: { kind: "anonymous", plan: rt.anonymousPlan, ipKey } };
}
