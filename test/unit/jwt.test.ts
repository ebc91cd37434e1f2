// JWT verification with real keys (jose): only a valid token passes, and every refusal says why.
import { createHmac, generateKeyPairSync } from "node:crypto";
import { exportJWK, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { JwtVerifier } from "../../src/identity/jwt.js";

const SECRET = "0123456789abcdef0123456789abcdef-test-secret";
const options = {
  issuer: "https://auth.example.com",
  audience: "api",
  clockToleranceMs: 5000,
  claims: { client: "sub", tenant: "tenant", plan: "plan" },
};
const NOW = Math.floor(Date.now() / 1000);

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

function hs(claims: Record<string, unknown>, secret: string | Buffer = SECRET, alg = "HS256"): string {
  const body = `${b64({ alg, typ: "JWT" })}.${b64(claims)}`;
  const hashName = { HS256: "sha256", HS384: "sha384", HS512: "sha512" }[alg] ?? "sha256";
  return `${body}.${createHmac(hashName, secret).update(body).digest("base64url")}`;
}

const good = {
  sub: "acme-prod",
  tenant: "acme",
  plan: "pro",
  iss: options.issuer,
  aud: "api",
  exp: NOW + 600,
};

describe("JwtVerifier, HMAC secret", () => {
  const verifier = new JwtVerifier({ secret: SECRET }, options);

  it.each([
    ["valid", good, null],
    ["expired", { ...good, exp: NOW - 60 }, "the JWT has expired"],
    ["not yet valid", { ...good, nbf: NOW + 60 }, "the JWT is not valid yet (nbf is in the future)"],
    [
      "wrong issuer",
      { ...good, iss: "https://evil.example.com" },
      "the JWT's issuer is not the one this gateway accepts",
    ],
    ["wrong audience", { ...good, aud: "other" }, "the JWT's audience is not the one this gateway accepts"],
    ["no client claim", { ...good, sub: undefined }, 'the JWT has no "sub" claim'],
    ["a claim that could inject a header", { ...good, tenant: "acme\r\nx-evil: 1" }, "does not forward"],
  ] as const)("%s", async (_name, claims, refusal) => {
    const result = await verifier.verify(hs(claims as Record<string, unknown>));
    if (refusal === null) {
      expect(result).toMatchObject({
        ok: true,
        identity: { client: "acme-prod", tenant: "acme", plan: "pro" },
      });
      expect(result.ok && result.identity.claims.sub).toBe("acme-prod");
    } else {
      expect(result.ok).toBe(false);
      expect(!result.ok && result.detail).toContain(refusal);
    }
  });

  it("accepts exp within the clock tolerance", async () => {
    expect((await verifier.verify(hs({ ...good, exp: NOW - 2 }))).ok).toBe(true);
  });

  it("refuses a bad signature, alg none and garbage", async () => {
    const forged = hs(good, "another-secret-another-secret-another");
    expect(await verifier.verify(forged)).toEqual({
      ok: false,
      detail: "the JWT's signature does not verify",
    });
    const unsigned = `${b64({ alg: "none", typ: "JWT" })}.${b64(good)}.`;
    expect(await verifier.verify(unsigned)).toEqual({
      ok: false,
      detail: "unsigned JWTs (alg: none) are not accepted",
    });
    const noneUpper = `${b64({ alg: "NONE" })}.${b64(good)}.`;
    expect((await verifier.verify(noneUpper)).ok).toBe(false);
    expect(await verifier.verify("not.a.jwt")).toMatchObject({ ok: false });
    expect(await verifier.verify("")).toMatchObject({ ok: false });
  });

  it("remembers a verified token, but not past its expiry", async () => {
    const token = hs({ ...good, exp: NOW + 1 });
    expect((await verifier.verify(token)).ok).toBe(true);
    expect((await verifier.verify(token, (NOW + 1) * 1000 + 6000)).ok).toBe(false);
  });
});

describe("JwtVerifier, public keys", () => {
  const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const rsaPem = rsa.publicKey.export({ type: "spki", format: "pem" }).toString();
  const ec = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const ed = generateKeyPairSync("ed25519");

  const sign = (alg: string, key: Parameters<SignJWT["sign"]>[0], claims = good, kid?: string) =>
    new SignJWT(claims as Record<string, unknown>).setProtectedHeader(kid ? { alg, kid } : { alg }).sign(key);

  it("RS256 and PS256 from an RSA public key; HS256 signed with that public key as secret is refused", async () => {
    const verifier = new JwtVerifier({ publicKeyPem: rsaPem }, options);
    expect((await verifier.verify(await sign("RS256", rsa.privateKey))).ok).toBe(true);
    expect((await verifier.verify(await sign("PS256", rsa.privateKey))).ok).toBe(true);
    // The classic confusion attack: the public key (which anyone has) used as an HMAC secret.
    const confused = hs(good, Buffer.from(rsaPem), "HS256");
    const result = await verifier.verify(confused);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.detail).toContain("algorithm HS256 does not fit this gateway's key");
  });

  it("ES256 from a P-256 key; an RSA-signed token is refused by it", async () => {
    const pem = ec.publicKey.export({ type: "spki", format: "pem" }).toString();
    const verifier = new JwtVerifier({ publicKeyPem: pem }, options);
    expect((await verifier.verify(await sign("ES256", ec.privateKey))).ok).toBe(true);
    expect((await verifier.verify(await sign("RS256", rsa.privateKey))).ok).toBe(false);
  });

  it("a JWKS selects the key by kid", async () => {
    const edJwk = { ...(await exportJWK(ed.publicKey)), kid: "ed-1" };
    const rsaJwk = { ...(await exportJWK(rsa.publicKey)), kid: "rsa-1", alg: "RS256" };
    const verifier = new JwtVerifier({ jwks: { keys: [edJwk, rsaJwk] } }, options);
    expect((await verifier.verify(await sign("EdDSA", ed.privateKey, good, "ed-1"))).ok).toBe(true);
    expect((await verifier.verify(await sign("RS256", rsa.privateKey, good, "rsa-1"))).ok).toBe(true);
    const other = generateKeyPairSync("ed25519");
    expect(await verifier.verify(await sign("EdDSA", other.privateKey, good, "ed-2"))).toEqual({
      ok: false,
      detail: "no key of this gateway matches the JWT's kid",
    });
  });

  it("refuses key material that cannot verify JWTs", () => {
    const dh = generateKeyPairSync("x25519").publicKey.export({ type: "spki", format: "pem" }).toString();
    expect(() => new JwtVerifier({ publicKeyPem: dh }, options)).toThrow(/x25519 key cannot verify JWTs/);
    expect(() => new JwtVerifier({ jwks: { keys: [] } }, options)).toThrow(/no keys/);
  });
});
