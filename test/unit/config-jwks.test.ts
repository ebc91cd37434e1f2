// identity.jwt's identity-provider keys (issuer alone: OIDC discovery; jwks_url), as --check
// sees them: offline, one case per failure mode with the exact position and message.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import { makeCertificate } from "../support/certs.js";

const BASE = `store: { url: "memory://" }
upstreams: { api: "http://127.0.0.1:3000" }
plans: { free: { global: { rate: 5/s, burst: 10 } } }
routes:
  - { name: default, match: { path: / }, upstream: api }
identity:
  jwt:
    default_plan: free
`;

const dir = mkdtempSync(join(tmpdir(), "tollgate-jwks-config-"));
const file = join(dir, "gw.yaml");
writeFileSync(join(dir, "ca.pem"), makeCertificate("ca", dir).cert);
writeFileSync(join(dir, "bad.pem"), "not a certificate\n");

const load = (jwt: string) => loadConfigText(BASE + jwt, file, {});
const problems = (jwt: string) => {
  const r = load(jwt);
  return r.ok ? [] : r.problems.map((p) => formatProblem(p).replaceAll(`${dir}/`, ""));
};

describe("identity.jwt from an identity provider", () => {
  it("issuer alone is OIDC discovery; beside another key it is only the required iss", () => {
    const discovery = load("    issuer: https://idp.example.com/tenant-1\n");
    expect(discovery.ok && discovery.jwt?.remote).toEqual({
      issuer: "https://idp.example.com/tenant-1",
      fetchTimeoutMs: 5000,
      refetchIntervalMs: 30_000,
      cacheFloorMs: 60_000,
      cacheCeilingMs: 86_400_000,
    });
    const secret = load(`    issuer: https://idp.example.com\n    secret: ${"s".repeat(32)}\n`);
    expect(secret.ok && secret.jwt?.remote).toBeUndefined();
  });

  it("jwks_url with a private CA: the CA is read, versions the config and is watched", () => {
    const r = load(
      "    jwks_url: https://127.0.0.1:8443/jwks\n    ca_file: ca.pem\n    refetch_interval: 10s\n    cache_floor: 5s\n    cache_ceiling: 1h\n    fetch_timeout: 2s\n",
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.jwt?.remote).toEqual({
      jwksUrl: "https://127.0.0.1:8443/jwks",
      ca: readFileSync(join(dir, "ca.pem"), "utf8"),
      fetchTimeoutMs: 2000,
      refetchIntervalMs: 10_000,
      cacheFloorMs: 5000,
      cacheCeilingMs: 3_600_000,
    });
    expect(r.keyFile).toBe(join(dir, "ca.pem"));
    expect(r.jwt?.algorithms).toContain("RS256");
  });

  it.each([
    [
      "no key at all",
      "    audience: api\n",
      "gw.yaml:8:5: identity.jwt: jwt needs a key: exactly one of secret, public_key_file, jwks_file or jwks_url, or issuer alone (its keys found by OIDC discovery)",
    ],
    [
      "two key sources",
      `    jwks_url: https://idp.example.com/jwks\n    secret: ${"s".repeat(32)}\n`,
      "gw.yaml:8:5: identity.jwt: jwt takes exactly one of secret, public_key_file, jwks_file or jwks_url, not secret and jwks_url",
    ],
    [
      "discovery over plain http off the machine",
      "    issuer: http://idp.example.com\n",
      "gw.yaml:9:5: identity.jwt: issuer alone is fetched from (OIDC discovery): http:// is accepted only on a loopback address (127.0.0.1, ::1, localhost): anyone on the path could replace the keys; use https://idp.example.com/",
    ],
    [
      "an issuer that is not a URL",
      "    issuer: idp.example.com\n",
      'gw.yaml:9:5: identity.jwt: issuer alone is fetched from (OIDC discovery): "idp.example.com" is not an absolute URL (expected https://host/path)',
    ],
    [
      "an issuer with a query",
      "    issuer: https://idp.example.com/?tenant=1\n",
      "gw.yaml:9:5: identity.jwt: issuer must not hold a query or fragment: the discovery document is at <issuer>/.well-known/openid-configuration",
    ],
    [
      "a jwks_url of another scheme",
      "    jwks_url: ftp://idp.example.com/jwks\n",
      "gw.yaml:9:5: identity.jwt: jwks_url: ftp:// is not a scheme keys are fetched over: use https://",
    ],
    [
      "ca_file without anything fetched",
      `    secret: ${"s".repeat(32)}\n    ca_file: ca.pem\n`,
      "gw.yaml:10:5: identity.jwt: ca_file is the CA of the identity provider the keys are fetched from: give jwks_url, or issuer alone (OIDC discovery), or remove ca_file",
    ],
    [
      "a ca_file that is not there",
      "    jwks_url: https://idp.example.com/jwks\n    ca_file: missing.pem\n",
      "gw.yaml:10:14: identity.jwt.ca_file: cannot read missing.pem: no such file",
    ],
    [
      "a ca_file that is not a certificate",
      "    jwks_url: https://idp.example.com/jwks\n    ca_file: bad.pem\n",
      "gw.yaml:10:14: identity.jwt.ca_file: bad.pem holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)",
    ],
    [
      "a refetch interval too short to protect the IdP",
      "    jwks_url: https://idp.example.com/jwks\n    refetch_interval: 100ms\n",
      "gw.yaml:10:5: identity.jwt: refetch_interval must be at least 1s: it is what stops forged kids from hammering the identity provider",
    ],
    [
      "a fetch deadline out of range",
      "    jwks_url: https://idp.example.com/jwks\n    fetch_timeout: 2m\n",
      "gw.yaml:10:5: identity.jwt: fetch_timeout must be between 100ms and 60s",
    ],
    [
      "a ceiling below the floor",
      "    jwks_url: https://idp.example.com/jwks\n    cache_floor: 10m\n    cache_ceiling: 5m\n",
      "gw.yaml:11:5: identity.jwt: cache_ceiling must not be shorter than cache_floor",
    ],
    [
      "a ceiling past a week",
      "    jwks_url: https://idp.example.com/jwks\n    cache_ceiling: 30d\n",
      "gw.yaml:10:5: identity.jwt: cache_ceiling must be at most 7d: keys an IdP rotates must be fetched again some day",
    ],
    [
      "a refetch interval past a day",
      "    jwks_url: https://idp.example.com/jwks\n    refetch_interval: 2d\n",
      "gw.yaml:10:5: identity.jwt: refetch_interval must be at most 1d",
    ],
  ])("%s", (_, jwt, message) => {
    expect(problems(jwt)).toEqual([message]);
  });
});
