// A local OIDC identity provider over HTTPS for the JWT-key tests: a certificate of its own
// (makeCertificate: self-signed, so it is its own CA for ca_file), a discovery document and a
// JWKS it can rotate, cache headers it is told, and the faults the gateway must survive (down,
// slow, another issuer). It counts every JWKS fetch, which is what the refetch gate bounds.
import { generateKeyPairSync, type KeyObject, randomUUID } from "node:crypto";
import { createServer, type Server } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { exportJWK, type JWK, SignJWT } from "jose";
import { makeCertificate, type TestCertificate } from "./certs.js";

export interface IdpKey {
  kid: string;
  privateKey: KeyObject;
  jwk: JWK;
}

export async function idpKey(kid: string = randomUUID()): Promise<IdpKey> {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: "ES256", use: "sig" } };
}

export class TestIdp {
  keys: IdpKey[] = [];
  cacheControl = "max-age=300";
  /** What the discovery document says the issuer is (default: the true one). */
  discoveryIssuer: string | undefined;
  /** Delay before any answer, in ms (a slow IdP). */
  delayMs = 0;
  /** Answer 503 to everything (an IdP that is up but failing). */
  failing = false;
  jwksFetches = 0;
  discoveryFetches = 0;
  private readonly sockets = new Set<Socket>();
  /** Answers held back by delayMs: cleared at close, so none runs into the next test file. */
  private readonly delayed = new Set<NodeJS.Timeout>();
  private port = 0;

  private constructor(
    readonly server: Server,
    readonly certificate: TestCertificate,
  ) {}

  static async start(certificate: TestCertificate = makeCertificate("idp")): Promise<TestIdp> {
    let idp!: TestIdp;
    const server = createServer({ cert: certificate.cert, key: certificate.key }, (req, res) => {
      const answer = () => {
        if (idp.failing) return res.writeHead(503).end("down for maintenance");
        if (req.url === "/.well-known/openid-configuration") {
          idp.discoveryFetches++;
          res.writeHead(200, { "content-type": "application/json" });
          return res.end(
            JSON.stringify({ issuer: idp.discoveryIssuer ?? idp.issuer, jwks_uri: `${idp.issuer}/jwks` }),
          );
        }
        if (req.url === "/jwks") {
          idp.jwksFetches++;
          res.writeHead(200, { "content-type": "application/json", "cache-control": idp.cacheControl });
          return res.end(JSON.stringify({ keys: idp.keys.map((k) => k.jwk) }));
        }
        res.writeHead(404).end();
      };
      if (idp.delayMs > 0) {
        const timer = setTimeout(() => {
          idp.delayed.delete(timer);
          answer();
        }, idp.delayMs);
        idp.delayed.add(timer);
      } else answer();
    });
    idp = new TestIdp(server, certificate);
    server.on("secureConnection", (s) => {
      idp.sockets.add(s);
      s.on("close", () => idp.sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    idp.port = (server.address() as AddressInfo).port;
    return idp;
  }

  get issuer(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  /** A token of `key` for this issuer. */
  token(key: IdpKey, claims: Record<string, unknown> = {}, kid = key.kid): Promise<string> {
    return new SignJWT({ sub: "user-1", iss: this.issuer, aud: "api", ...claims })
      .setProtectedHeader({ alg: "ES256", kid })
      .setIssuedAt()
      .setExpirationTime("10m")
      .sign(key.privateKey);
  }

  async close(): Promise<void> {
    for (const timer of this.delayed) clearTimeout(timer);
    this.delayed.clear();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
